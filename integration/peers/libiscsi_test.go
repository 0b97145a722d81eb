package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/integration/vmlab"
	"github.com/ddpstore/ddpstore/internal/conformance"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
)

const (
	oursIQN    = "iqn.2026-11.io.ddpstore:conf"
	oursPortal = guestAddr + ":3250"
)

// libiscsiISER lists the tests of iscsi-test-cu that fail over iSER in the
// guest for reasons that are libiscsi 1.19's iSER initiator's, not ours,
// and pass over iSCSI/TCP on the host (transport, TestLibiscsiConformance).
// docs/interop.md has the evidence. The test runs each again against
// Linux's LIO isert, and fails if LIO passes it; a listed test that passes
// against ddptarget fails the run too, so the list only shrinks.
var libiscsiISER = map[string]string{
	// libiscsi's iSER copies Data-In into its buffer by RDMA and reports
	// the buffer's size as the data's, ignoring the residual: a page
	// shorter than the allocation length looks as long as it.
	"Inquiry.AllocLength": "libiscsi's iSER ignores the Data-In residual",
	"Inquiry.BlockLimits": "libiscsi's iSER ignores the Data-In residual",
	"PrinReadKeys.Simple": "libiscsi's iSER ignores the Data-In residual",
	// libiscsi's iSER refuses to send a read with an expected transfer
	// length of 0 ("Read command with no expected transfer length",
	// iser_prepare_read_cmd) and a write without a data-out buffer
	// ("Can't find iovector data for DATA-OUT"), which is what these
	// tests send: the command never reaches the target, and its CmdSN is
	// spent, so the session's later commands leave a gap in the CmdSN
	// order that no target may fill.
	"iSCSIResiduals.Read10Invalid":          "libiscsi's iSER does not send a read with EDTL 0",
	"iSCSIResiduals.Read10Residuals":        "libiscsi's iSER does not send a read with EDTL 0",
	"iSCSIResiduals.Read12Residuals":        "libiscsi's iSER does not send a read with EDTL 0",
	"iSCSIResiduals.Read16Residuals":        "libiscsi's iSER does not send a read with EDTL 0",
	"iSCSIResiduals.Write10Residuals":       "libiscsi's iSER does not send a write without data-out",
	"iSCSIResiduals.Write12Residuals":       "libiscsi's iSER does not send a write without data-out",
	"iSCSIResiduals.Write16Residuals":       "libiscsi's iSER does not send a write without data-out",
	"iSCSIResiduals.WriteVerify10Residuals": "libiscsi's iSER does not send a write without data-out",
	"iSCSIResiduals.WriteVerify12Residuals": "libiscsi's iSER does not send a write without data-out",
	"iSCSIResiduals.WriteVerify16Residuals": "libiscsi's iSER does not send a write without data-out",
	// iscsi-test-cu segfaults in libiscsi.so in these (the guest's dmesg),
	// with no protocol error in our target's log; each passes against the
	// same target over iSCSI/TCP (transport, TestLibiscsiConformance).
	// The asynchronous ones keep more commands in flight than the window
	// allows (libiscsi's iSER ignores MaxCmdSN); the cmdsn ones wait out
	// a command the target rightly ignores; the reset ones reconnect.
	"Read10.Async":                  "iscsi-test-cu crashes in libiscsi's iSER",
	"Write10.Async":                 "iscsi-test-cu crashes in libiscsi's iSER",
	"iSCSITMF.AbortTaskSimpleAsync": "iscsi-test-cu crashes in libiscsi's iSER",
	"iSCSITMF.LUNResetSimpleAsync":  "iscsi-test-cu crashes in libiscsi's iSER",
	"iSCSIcmdsn.iSCSICmdSnTooHigh":  "iscsi-test-cu crashes in libiscsi's iSER",
	"iSCSIcmdsn.iSCSICmdSnTooLow":   "iscsi-test-cu crashes in libiscsi's iSER",
	"Reserve6.ITNexusLoss":          "iscsi-test-cu crashes in libiscsi's iSER",
	"Reserve6.LUNReset":             "iscsi-test-cu crashes in libiscsi's iSER",
	"Reserve6.TargetColdReset":      "iscsi-test-cu crashes in libiscsi's iSER",
	"Reserve6.TargetWarmReset":      "iscsi-test-cu crashes in libiscsi's iSER",
	"ExtendedCopy.Simple":           "iscsi-test-cu crashes in libiscsi's iSER",
	"WriteSame16.Unmap":             "iscsi-test-cu crashes in libiscsi's iSER",
}

// libiscsiFlaky are tests in which iscsi-test-cu crashes in libiscsi's
// iSER in some runs of the whole suite and passes in others (the same
// segfaults as above; each passes over iSCSI/TCP). Their outcome is
// logged, not judged: listing them with libiscsiISER would fail every run
// in which they pass.
var libiscsiFlaky = map[string]string{
	"ExtendedCopy.ParamHdr":     "crashed in one of four runs",
	"ProutReserve.AccessEARO":   "crashed in two of four runs",
	"ProutReserve.AccessWERO":   "crashed in one of four runs",
	"ProutReserve.OwnershipEA":  "crashed in one of four runs",
	"Reserve6.Logout":           "crashed in two of four runs",
	"WriteSame16.UnmapUntilEnd": "crashed in one of four runs",
}

// probes are what the guest runs of the suite by default (make test):
// the Inquiry suite (two of libiscsi's listed defects), and a test of
// each command family whose data moves by RDMA, writes included (with
// ImmediateData=No, every write's data is fetched by RDMA Read), in
// about a minute and a half. PEERS_LIBISCSI=all runs every test (about
// 10 minutes under TCG); docs/interop.md has that run's results.
var probes = []string{"Inquiry", "TestUnitReady", "ReadCapacity16", "Write10.Simple", "Write10.ZeroBlocks",
	"Write16.Simple", "Read16.Simple", "CompareAndWrite.Simple", "Verify16.Mismatch", "Unmap.Simple"}

// TestGuestLibiscsi runs libiscsi's conformance suite over iSER against our
// target, judges the results against the not-applicable list the host run
// uses and libiscsiISER, and runs each failure again against LIO isert: a
// failure LIO shares is libiscsi's (or siw's), one LIO passes is ours.
// When libiscsi cannot log in to LIO (it crashes in its second login
// there, see the control below) the control is logged as missing.
// The whole suite runs suite by suite (a crash of iscsi-test-cu ends only
// its suite; the tests it did not reach then run one by one).
func TestGuestLibiscsi(t *testing.T) {
	inGuest(t)
	tg := startOurs(t)
	ours := "iser://" + oursPortal + "/" + oursIQN + "/0"
	all := listTests(t)
	specs := probes
	if b, _ := os.ReadFile(libiscsiSpec); len(strings.Fields(string(b))) > 0 {
		// PEERS_LIBISCSI: "all", or suites and SUITE.TEST names.
		specs = strings.Fields(string(b))
		if specs[0] == "all" {
			specs = suites(all)
		}
	}
	results := map[string]bool{}
	outs := map[string]string{} // the output of the run each test's result is from
	start := time.Now()
	for _, spec := range specs {
		out, _ := runCU(t, "ALL."+spec, ours)
		for name, ok := range conformance.Parse(out) {
			results[name], outs[name] = ok, out
		}
	}
	var crashes []string
	for _, name := range all {
		if !inSpecs(name, specs) {
			continue
		}
		ok, ran := results[name]
		_, listed := libiscsiISER[name]
		switch {
		case !ran, !ok && !listed && lostConnection(excerpt(outs[name], name)):
		default:
			continue
		}
		// A run in which iscsi-test-cu dies of a signal judges nothing,
		// nor does one in which libiscsi's iSER lost its connection
		// ("revents is not POLLIN"): both happen now and then, against
		// LIO too, more often on a busy host (two guests under TCG;
		// docs/interop.md). Such a test runs again, up to crashRuns
		// times in all (the listed ones, known to crash, once).
		for run := 1; ; run++ {
			out, err := runCU(t, "ALL."+name, ours)
			ok, ran := conformance.Parse(out)[name]
			if listed {
				results[name], outs[name] = ran && ok, out
				break
			}
			flake := ""
			switch {
			case !ran && crashed(err):
				flake = fmt.Sprintf("iscsi-test-cu crashed (%v)", err)
			case ran && !ok && lostConnection(excerpt(out, name)):
				flake = "libiscsi's iSER lost its connection"
			}
			if flake != "" && run < crashRuns {
				t.Logf("%s: %s in run %d; running it again", name, flake, run)
				continue
			}
			if !ran && crashed(err) {
				crashes = append(crashes, name)
				t.Logf("%s: iscsi-test-cu crashed in each of %d runs, not judged:\n%s", name, run, out)
				break
			}
			results[name], outs[name] = ran && ok, out
			break
		}
	}
	t.Logf("iscsi-test-cu over iSER against ddptarget: %d tests in %.0f s", len(results), time.Since(start).Seconds())
	if len(crashes) > maxCrashes {
		t.Errorf("iscsi-test-cu crashed in every run of %d tests (%s): too many to call libiscsi's", len(crashes), strings.Join(crashes, ", "))
	}
	for name := range libiscsiFlaky {
		if ok, ran := results[name]; ran {
			t.Logf("%s (crashes now and then, not judged): passed %v", name, ok)
			delete(results, name)
		}
	}
	failed, stale := conformance.Judge(results, conformance.NotApplicable, libiscsiISER)
	for _, name := range failed {
		t.Logf("%s against ddptarget:\n%s", name, excerpt(outs[name], name))
	}
	for _, name := range stale {
		t.Errorf("%s passes over iSER: take it off its list", name)
	}
	var control []string
	control = append(control, failed...)
	for name := range libiscsiISER {
		if ok, ran := results[name]; ran && !ok {
			control = append(control, name)
		}
	}
	sort.Strings(control)
	if len(control) > 0 {
		t.Cleanup(func() { logDmesg(t) })
		lio := "iser://" + startLIO(t) + "/" + lioIQN + "/0"
		for _, name := range control {
			out, _ := runCU(t, "ALL."+name, lio)
			ok, ran := conformance.Parse(out)[name]
			_, listed := libiscsiISER[name]
			switch {
			case !ran:
				// libiscsi's iSER crashes in its second login to LIO
				// (each iscsi-test-cu logs in to probe the LU, then
				// per test), and LIO refuses every later login of the
				// boot; docs/interop.md. A test that is listed then
				// rests on the evidence there; one that is not still
				// fails the run.
				t.Logf("%s: the control did not run, libiscsi could not log in to LIO isert:\n%s", name, out)
				if !listed {
					t.Errorf("%s fails against ddptarget over iSER and is not listed", name)
				}
			case ok:
				t.Errorf("%s fails against ddptarget over iSER and passes against LIO isert: ours", name)
			case !listed:
				t.Errorf("%s fails against ddptarget over iSER and against LIO isert too: list it in libiscsiISER with the evidence", name)
			}
			if ran {
				t.Logf("%s against LIO isert: passed %v\n%s", name, ok, excerpt(out, name))
			}
		}
	}
	passed := 0
	for _, ok := range results {
		if ok {
			passed++
		}
	}
	t.Logf("%d tests judged, %d passed; the others are not applicable (%d listed) or libiscsi's (%d listed); %d flaky ones not judged",
		len(results), passed, len(conformance.NotApplicable), len(libiscsiISER), len(libiscsiFlaky))
	tg.logWarnings(t)
}

// inSpecs reports whether test SUITE.TEST is one of specs (suites or
// tests).
func inSpecs(name string, specs []string) bool {
	suite, _, _ := strings.Cut(name, ".")
	for _, s := range specs {
		if s == name || s == suite {
			return true
		}
	}
	return false
}

// listTests is every test of iscsi-test-cu, as SUITE.TEST.
func listTests(t *testing.T) []string {
	out, err := runProg(t, time.Minute, "iscsi-test-cu", "-l")
	if err != nil {
		t.Fatalf("iscsi-test-cu -l: %v\n%s", err, out)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^ALL\.([^.\s]+\.[^.\s]+)$`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	if len(names) < 200 {
		t.Fatalf("iscsi-test-cu -l lists %d tests\n%s", len(names), out)
	}
	return names
}

func suites(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		s, _, _ := strings.Cut(n, ".")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// runCU runs iscsi-test-cu with --dataloss on spec against url, for at most
// two minutes (a test whose connection libiscsi's iSER has lost waits out
// its timeouts; the probes take seconds, but up to a minute under TCG on a
// busy host).
func runCU(t *testing.T, spec, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := prog(ctx, "iscsi-test-cu", "-t", spec, "--dataloss",
		"-i", "iqn.2026-11.io.ddpstore:libiscsi", "-I", "iqn.2026-11.io.ddpstore:libiscsi-2", url)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s: no end within two minutes", spec)
	}
	return string(out), err
}

// crashRuns is how many times a test runs in which iscsi-test-cu keeps
// dying of a signal before it is left unjudged.
const crashRuns = 3

// maxCrashes is how many tests may be left unjudged so: more, and the
// crashes say more about the target than about libiscsi.
const maxCrashes = 2

// crashed reports whether iscsi-test-cu's run ended by a signal: a
// segfault in libiscsi's iSER, or glibc aborting on a corrupted heap.
func crashed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() != syscall.SIGKILL // SIGKILL: the two minutes ran out
}

// lostConnection reports whether libiscsi's iSER lost its connection in
// out: its event channel woke with something other than an event
// (docs/interop.md has it against LIO as well).
func lostConnection(out string) bool {
	return strings.Contains(out, "revents is not POLLIN")
}

// excerpt is the part of iscsi-test-cu's output about one test.
func excerpt(out, name string) string {
	_, test, _ := strings.Cut(name, ".")
	i := strings.Index(out, "Test: "+test+" ")
	if i < 0 {
		return out
	}
	out = out[i:]
	if j := strings.Index(out[1:], "Test: "); j > 0 {
		out = out[:j+1]
	}
	if j := strings.Index(out, "Run Summary"); j > 0 {
		out = out[:j]
	}
	return out
}

// ourTarget is our iSER target in this process, serving one 64 MiB memory
// LU, its warnings kept for the log.
type ourTarget struct {
	log *vmlabLog
}

// vmlabLog keeps the warnings and errors of a logger.
type vmlabLog struct{ vmlab.SyncBuffer }

func (l *vmlabLog) Levels() []log.Level {
	return []log.Level{log.PanicLevel, log.FatalLevel, log.ErrorLevel, log.WarnLevel}
}

func (l *vmlabLog) Fire(e *log.Entry) error {
	s, _ := e.String()
	l.Write([]byte(s))
	return nil
}

func startOurs(t *testing.T) *ourTarget {
	store, err := blockdev.NewMemory(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := lu.New(1, store)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := lu.NewTarget(oursIQN, map[uint16]*lu.LU{0: l})
	if err != nil {
		t.Fatal(err)
	}
	ot := &ourTarget{log: &vmlabLog{}}
	logger := log.New()
	logger.SetOutput(discard{})
	logger.AddHook(ot.log)
	dev := iwarp.NewDevice(0)
	ln, err := dev.Listen("tcp", oursPortal, iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := target.NewServer(dev, target.Config{
		// libiscsi's iSER puts the immediate data's length into a
		// command's BHS but not the data into its Send (docs/interop.md),
		// so the target offers ImmediateData=No, as a user of libiscsi
		// over iSER would configure it (immediate_data: false), and
		// fetches every write's data by RDMA Read.
		Exports: []target.Export{{Target: tg, NoImmediateData: true}},
		Portals: []login.Portal{{Addr: oursPortal, TPGT: 1}},
		Log:     log.NewEntry(logger),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
		dev.Close()
	})
	return ot
}

func (o *ourTarget) logWarnings(t *testing.T) {
	if s := o.log.String(); s != "" {
		t.Logf("our target's warnings and errors:\n%s", s)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
