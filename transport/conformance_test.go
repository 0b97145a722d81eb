package transport_test

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// notApplicable lists the tests of libiscsi's iscsi-test-cu that do not
// apply to ddptarget, each with the clause that says why
// (docs/interop.md, "libiscsi's conformance suite"). The test fails when
// one of them passes, so the list cannot outlive its reason.
var notApplicable = map[string]string{
	// The test corrupts DataSN and expects the WRITE to fail, then the
	// next one to succeed on the same session. At ErrorRecoveryLevel 0 (the
	// only level we negotiate, RFC 7143 section 13.20) a DataSN error can
	// only be recovered by session recovery (section 7.1.4.2 and 7.14): the
	// target drops the connection, and libiscsi, told not to reconnect,
	// fails the later commands of the test as well.
	"iSCSIdatasn.iSCSIDataSnInvalid": "ErrorRecoveryLevel 0: a DataSN error ends the connection (RFC 7143 sections 7.1, 13.20)",
}

// openBugs are failures that are ours and not fixed yet (issue 17). Unlike
// notApplicable this list may only shrink: a test listed here that passes
// fails the run, so the fix removes it.
var openBugs = map[string]string{}

// TestLibiscsiConformance runs libiscsi's SCSI and iSCSI conformance suite
// (iscsi-test-cu, every test once, destructive ones included) against an
// LU served over iSCSI/TCP, and fails on any failure that is not listed in
// notApplicable.
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
	results := parseCUnit(string(out))
	if spec != "ALL" {
		t.Logf("%s", out)
		return
	}
	if len(results) < 200 {
		t.Fatalf("iscsi-test-cu ran %d tests, not the whole suite:\n%s", len(results), out)
	}
	var failed, stale []string
	for name, ok := range results {
		_, na := notApplicable[name]
		_, bug := openBugs[name]
		listed := na || bug
		switch {
		case !ok && !listed:
			failed = append(failed, name)
		case ok && listed:
			stale = append(stale, name)
		}
	}
	sort.Strings(failed)
	sort.Strings(stale)
	if len(failed) > 0 || len(stale) > 0 {
		t.Errorf("failed: %v\nlisted as not applicable but passed: %v\n%s", failed, stale, out)
	}
	t.Logf("%d tests, %d not applicable, %d open bugs", len(results), len(notApplicable), len(openBugs))
}

var cuTest = regexp.MustCompile(`(?m)^Suite: (\S+)|^  Test: (\S+) \.\.\.`)

// parseCUnit reads CUnit's console output: each test's name, SUITE.TEST,
// and whether it passed.
func parseCUnit(out string) map[string]bool {
	res := map[string]bool{}
	suite, name := "", ""
	idx := cuTest.FindAllStringSubmatchIndex(out, -1)
	for i, m := range idx {
		if m[2] >= 0 {
			suite = out[m[2]:m[3]]
			continue
		}
		name = suite + "." + out[m[4]:m[5]]
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		body := out[m[1]:end]
		res[name] = !strings.Contains(body, "FAILED") && strings.Contains(body, "passed")
	}
	return res
}
