package sctp

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// guestRuns are the test binaries the guest runs, in one boot, and the
// tests each must pass there (not skip: inside the guest, those tests
// fail when the kernel has no SCTP).
var guestRuns = []struct {
	name, pkg, run string
	want           []string
}{
	{"sctp", "../../iwarp/sctp", "Kernel|^TestSessions$|^TestSessionRejected$|^TestIllegalFromPeer$", []string{
		"TestKernelAdaptationIndication", "TestKernelWire", "TestKernelClose",
		"TestSessions/kernel", "TestSessionRejected/kernel",
	}},
	{"iwarp", "../../iwarp", "^TestSCTPKernel$", []string{
		"TestSCTPKernel/Operations", "TestSCTPKernel/TerminateCodes", "TestSCTPKernel/SendWithInvalidate",
		"TestSCTPKernel/SCTPSizes", "TestSCTPKernel/SCTPGraceful", "TestSCTPKernel",
	}},
	{"transport", "../../transport", "^TestOverSCTPKernel$", []string{
		"TestOverSCTPKernel/ReadWrite", "TestOverSCTPKernel/SCSICommands", "TestOverSCTPKernel/Nop",
	}},
}

// benchArgs run BenchmarkRDMAWrite over MPA/TCP and kernel SCTP in the
// guest, and BenchmarkTCPLoopback beside them: informative only (the
// numbers are logged, never checked).
var benchArgs = []string{"-test.run", "^$", "-test.bench", "^(BenchmarkRDMAWrite|BenchmarkTCPLoopback)$/^(4KiB|64KiB|1MiB)(-KernelSCTP)?$", "-test.benchtime", "50x", "-test.benchmem"}

// TestKernelSCTP builds the kernel SCTP tests of iwarp/sctp, iwarp and
// transport as static binaries, boots the vmlab guest once (building it
// first when missing, as root) and runs them there, then the RDMA Write
// benchmark. It fails unless every test listed in guestRuns passed; it
// skips, saying why, only when the guest cannot run.
func TestKernelSCTP(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -u\n")
	for _, r := range guestRuns {
		vmlab.BuildTest(t, r.pkg, filepath.Join(dir, r.name+".test"))
		fmt.Fprintf(&script, "echo '=== guest: %[1]s'\n./%[1]s.test -test.v -test.count=1 -test.timeout=10m -test.run '%[2]s'\necho \"=== guest: %[1]s exit $?\"\n", r.name, r.run)
	}
	fmt.Fprintf(&script, "echo '=== guest: bench'\n./iwarp.test %s\necho \"=== guest: bench exit $?\"\n", shellQuote(benchArgs))
	if err := os.WriteFile(filepath.Join(dir, "guest.sh"), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "1200", "-M", "sctp", "-s", filepath.Join(dir, "guest.sh"))
	// The failures first: CI keeps the head and the tail of a long log.
	if err != nil {
		t.Errorf("guest: %v", err)
	}
	if f := vmlab.Failures(out); f != "" {
		t.Errorf("failed in the guest:\n%s", f)
	}
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.FailNow()
	}
	for _, r := range guestRuns {
		if !bytes.Contains(out, []byte(fmt.Sprintf("=== guest: %s exit 0\n", r.name))) {
			t.Errorf("the %s tests failed in the guest (see its output above)", r.name)
		}
		for _, name := range r.want {
			if !regexp.MustCompile(`--- PASS: ` + regexp.QuoteMeta(name) + ` \(`).Match(out) {
				t.Errorf("%s: %s did not pass in the guest", r.name, name)
			}
		}
	}
	// The benchmark is informative: its lines are repeated for the log.
	var bench []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			bench = append(bench, l)
		}
	}
	t.Logf("benchmarks in the guest (TCG, informative):\n%s", strings.Join(bench, "\n"))
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
