package transport_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/internal/conformance"
)

// openBugs are failures that are ours and not fixed yet (issue 17). Unlike
// conformance.NotApplicable this list may only shrink: a test listed here that passes
// fails the run, so the fix removes it.
var openBugs = map[string]string{}

// TestLibiscsiConformance runs libiscsi's SCSI and iSCSI conformance suite
// (iscsi-test-cu, every test once, destructive ones included) against an
// LU served over iSCSI/TCP, and fails on any failure that is not listed in
// conformance.NotApplicable (internal/conformance, shared with the guest
// run over iSER in integration/peers).
func TestLibiscsiConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes about 10 s: not with -short")
	}
	if out, err := exec.Command("../scripts/conformance.sh").CombinedOutput(); err != nil {
		t.Skipf("libiscsi's test tool is not available: %s", strings.TrimSpace(string(out)))
	}
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{64 << 20}, tcp: true})
	url := "iscsi://" + r.tcpAddr + "/" + targetName + "/0"
	spec := "ALL"
	if v := os.Getenv("CU_TEST"); v != "" {
		spec = v // one test or suite, when chasing a failure
	}
	out, _ := exec.Command("iscsi-test-cu", "-t", spec, "--dataloss",
		"-i", "iqn.2026-11.io.ddpstore:libiscsi", "-I", "iqn.2026-11.io.ddpstore:libiscsi-2", url).CombinedOutput()
	results := conformance.Parse(string(out))
	if spec != "ALL" {
		t.Logf("%s", out)
		return
	}
	if len(results) < 200 {
		t.Fatalf("iscsi-test-cu ran %d tests, not the whole suite:\n%s", len(results), out)
	}
	failed, stale := conformance.Judge(results, conformance.NotApplicable, openBugs)
	if len(failed) > 0 || len(stale) > 0 {
		t.Errorf("failed: %v\nlisted as not applicable but passed: %v\n%s", failed, stale, out)
	}
	t.Logf("%d tests, %d not applicable, %d open bugs", len(results), len(conformance.NotApplicable), len(openBugs))
}
