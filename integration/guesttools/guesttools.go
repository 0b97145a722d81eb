// Package guesttools runs, inside the vmlab guest, the Debian programs a
// host test copied into the shared directory with their libraries and
// dynamic loader (open-iscsi's iscsid and iscsiadm, dmsetup, fio), and
// holds what the guest tests that log Linux's iSCSI initiator in share:
// iscsid's configuration and start, and O_DIRECT buffers to check data
// with.
package guesttools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
	"golang.org/x/sys/unix"
)

// Tools runs the programs copied under Root: bin/ and lib/ (with
// ld-linux-x86-64.so.2).
type Tools struct {
	Root string
}

// Command is name from bin/, run by the copied loader on the copied
// libraries.
func (o *Tools) Command(name string, args ...string) *exec.Cmd {
	lib := filepath.Join(o.Root, "lib")
	cmd := exec.Command(filepath.Join(lib, "ld-linux-x86-64.so.2"),
		append([]string{"--library-path", lib, filepath.Join(o.Root, "bin", name)}, args...)...)
	// No udev in the guest: libdevmapper makes the device nodes itself.
	cmd.Env = append(os.Environ(), "DM_DISABLE_UDEV=1")
	return cmd
}

// Run runs a program and returns its output.
func (o *Tools) Run(name string, args ...string) (string, error) {
	out, err := o.Command(name, args...).CombinedOutput()
	return string(out), err
}

// ISCSIDConf is open-iscsi's configuration for a test: Debian's defaults,
// except that a failed session's I/O fails after replacement seconds
// rather than two minutes (10 for a single path; a multipath set-up wants
// it short), NOP-Outs time out after noopTimeout seconds, login failures
// give up soon, and iscsiadm never starts iscsid itself.
func ISCSIDConf(replacement, noopTimeout int) string {
	return fmt.Sprintf(`iscsid.startup = /bin/true
node.startup = manual
node.leading_login = No
node.session.timeo.replacement_timeout = %d
node.conn[0].timeo.login_timeout = 15
node.conn[0].timeo.logout_timeout = 15
node.conn[0].timeo.noop_out_interval = 5
node.conn[0].timeo.noop_out_timeout = %d
node.session.err_timeo.abort_timeout = 15
node.session.err_timeo.lu_reset_timeout = 30
node.session.err_timeo.tgt_reset_timeout = 30
node.session.err_timeo.host_reset_timeout = 60
node.session.initial_login_retry_max = 1
node.session.cmds_max = 128
node.session.queue_depth = 32
node.session.iscsi.InitialR2T = No
node.session.iscsi.ImmediateData = Yes
node.session.iscsi.FirstBurstLength = 262144
node.session.iscsi.MaxBurstLength = 16776192
node.conn[0].iscsi.MaxRecvDataSegmentLength = 262144
node.conn[0].iscsi.MaxXmitDataSegmentLength = 0
discovery.sendtargets.iscsi.MaxRecvDataSegmentLength = 32768
node.session.nr_sessions = 1
node.session.reopen_max = 0
node.session.iscsi.FastAbort = Yes
node.session.scan = auto
`, replacement, noopTimeout)
}

// StartISCSID writes conf and the initiator name iqn into the guest's /etc
// and starts o's iscsid in the foreground (with extra arguments, e.g. "-d",
// "1"); it is stopped, and what it said logged, when the test ends.
func StartISCSID(t *testing.T, o *Tools, iqn, conf string, extra ...string) {
	for _, d := range []string{"/etc/iscsi", "/var/lib/iscsi", "/run/lock/iscsi", "/var/lock"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"/etc/iscsi/initiatorname.iscsi": "InitiatorName=" + iqn + "\n",
		"/etc/iscsi/iscsid.conf":         conf,
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"-f", "-n"}, extra...)
	cmd := o.Command("iscsid", append(args, "-c", "/etc/iscsi/iscsid.conf", "-i", "/etc/iscsi/initiatorname.iscsi")...)
	var out vmlab.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// iscsid's SIGTERM handler signals its whole process group: keep
	// this test out of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("iscsid: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(unix.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		t.Logf("iscsid said:\n%s", out.String())
	})
	// iscsiadm exits 20 (ISCSI_ERR_ISCSID_NOTCONN) until iscsid listens,
	// and 21 (no sessions) once it answers.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := o.Run("iscsiadm", "-m", "session")
		if ee, ok := err.(*exec.ExitError); err == nil || ok && ee.ExitCode() != 20 {
			return
		}
		select {
		case <-exited:
			t.Fatalf("iscsid exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("iscsiadm cannot reach iscsid 20 s after its start: %v: %s", err, out)
		}
	}
}

// AlignedBuf returns n octets of page-aligned memory for O_DIRECT, unmapped
// when the test ends.
func AlignedBuf(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// Fill fills b with rng's octets, eight at a time.
func Fill(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// Diff describes where got first differs from want, or says "equal".
func Diff(got, want []byte) string {
	for i := range got {
		if got[i] != want[i] {
			end := min(len(got), i+16)
			return fmt.Sprintf("first difference at +%d (of %d): got % x, want % x", i, len(got), got[i:end], want[i:end])
		}
	}
	return "equal"
}

// CheckFio checks fio's --output-format=json output (anything fio printed
// before the JSON is skipped): wantJobs jobs, each without error, each
// having read and written.
func CheckFio(t testing.TB, stdout []byte, wantJobs int) {
	t.Helper()
	var res struct {
		Jobs []struct {
			Name  string `json:"jobname"`
			Error int    `json:"error"`
			Read  struct {
				IOBytes int64 `json:"io_bytes"`
			} `json:"read"`
			Write struct {
				IOBytes int64 `json:"io_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	o := stdout
	if i := bytes.IndexByte(o, '{'); i > 0 {
		o = o[i:]
	}
	if err := json.Unmarshal(o, &res); err != nil {
		t.Fatalf("fio output: %v\n%s", err, stdout)
	}
	if len(res.Jobs) != wantJobs {
		t.Errorf("fio ran %d jobs, want %d", len(res.Jobs), wantJobs)
	}
	for _, j := range res.Jobs {
		if j.Error != 0 || j.Write.IOBytes == 0 || j.Read.IOBytes == 0 {
			t.Errorf("fio job %s: error %d, read %d, written %d", j.Name, j.Error, j.Read.IOBytes, j.Write.IOBytes)
		}
	}
}
