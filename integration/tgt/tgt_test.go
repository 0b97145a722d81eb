package tgt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/ddpstore/ddpstore/integration/guesttools"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/tgtpeer"
	"github.com/ddpstore/ddpstore/internal/testbin"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

const (
	targetName    = "iqn.2026-11.io.ddpstore:tgt1"
	initiatorName = "iqn.2026-11.io.ddpstore:host1"
	lunSize       = 64 << 20
	// tgt's LUN 0 is always its controller (peripheral type 0Ch); the
	// file is LUN 1, in 512-octet blocks.
	diskLUN   = 1
	blockSize = 512
)

var initiatorProg = &testbin.Program{Name: "ddpinitiator"}

func TestMain(m *testing.M) { testbin.Main(m) }

// safeBuf collects a process's output.
type safeBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *safeBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// tgtd is a running tgtd with one target of one LUN on a file.
type tgtd struct {
	addr    string // its iSCSI portal
	control int    // its control port: tgtadm -C
	file    string // LUN 1's backing file
	cmd     *exec.Cmd
	logs    *safeBuf
	done    chan struct{}
}

// needTgt installs tgt with scripts/tgt.sh, skipping with its message
// when it cannot; tgtd also needs root for its control socket.
func needTgt(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("../../scripts/tgt.sh").CombinedOutput(); err != nil {
		t.Skipf("tgt not available: %s", strings.TrimSpace(string(out)))
	}
	if os.Geteuid() != 0 {
		t.Skip("tgtd needs root: its control socket is in /var/run/tgtd")
	}
}

// startTgtd runs tgtd in the foreground on a free loopback port, with a
// control port of its own (socket /var/run/tgtd/socket.N, apart from a
// system tgtd's socket.0), and exports a 64 MiB file in t.TempDir() as
// LUN 1 of targetName to every initiator. Cleanup shuts it down.
func startTgtd(t *testing.T) *tgtd {
	t.Helper()
	needTgt(t)
	file := filepath.Join(t.TempDir(), "lun1.img")
	if err := tgtpeer.NewImage(file, lunSize); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/var/run/tgtd", 0o755); err != nil {
		t.Fatal(err)
	}
	var d *tgtd
	// The port may be taken meanwhile, or the control port be another
	// tgtd's (its socket's lock is held): then try another.
	for try := 0; d == nil; try++ {
		d = tryTgtd(t, file, try == 4)
	}
	t.Cleanup(func() {
		d.stop(t)
		// tgtd leaves its control socket behind.
		sock := fmt.Sprintf("/var/run/tgtd/socket.%d", d.control)
		os.Remove(sock)
		os.Remove(sock + ".lock")
		if t.Failed() {
			t.Logf("tgtd log:\n%s", d.logs.String())
		}
	})
	if err := tgtpeer.Create(d.tgtadm, tgtpeer.Target{LLD: "iscsi", TID: 1, IQN: targetName, LUN: diskLUN, File: d.file}, 0); err != nil {
		t.Fatal(err)
	}
	// tgt offers no digests unless told; with both allowed, it takes
	// the initiator's first choice.
	for _, k := range []string{"HeaderDigest", "DataDigest"} {
		d.adm(t, "--op", "update", "--mode", "target", "--tid", "1", "--name", k, "--value", "CRC32C,None")
	}
	return d
}

// tryTgtd starts tgtd on a free port, its control port derived from it
// (tgtd takes 1..32767), and waits until it listens. When tgtd exits
// first it returns nil, or fails the test if last.
func tryTgtd(t *testing.T, file string, last bool) *tgtd {
	t.Helper()
	d := &tgtd{file: file, logs: &safeBuf{}, done: make(chan struct{})}
	d.addr = testbin.FreeAddr(t)
	_, port, _ := net.SplitHostPort(d.addr)
	p, _ := strconv.Atoi(port)
	d.control = 1 + p%32767
	d.cmd = exec.Command("tgtd", "--foreground", "--control-port", strconv.Itoa(d.control), "--iscsi", "portal="+d.addr)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", d.addr)
		if err == nil {
			c.Close()
			return d
		}
		select {
		case <-d.done:
			if last {
				t.Fatalf("tgtd exited: %v\n%s", d.cmd.ProcessState, d.logs.String())
			}
			t.Logf("tgtd on %s, control port %d, exited (%v); trying another port:\n%s", d.addr, d.control, d.cmd.ProcessState, d.logs.String())
			return nil
		default:
		}
		if time.Now().After(deadline) {
			d.cmd.Process.Kill()
			<-d.done
			t.Fatalf("tgtd not listening on %s after 20 s\n%s", d.addr, d.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tgtadm runs tgtadm on this tgtd's control port.
func (d *tgtd) tgtadm(args ...string) (string, error) {
	out, err := exec.Command("tgtadm", append([]string{"-C", strconv.Itoa(d.control)}, args...)...).CombinedOutput()
	return string(out), err
}

// adm runs tgtadm with the iscsi driver and fails the test when it does.
func (d *tgtd) adm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.tgtadm(append([]string{"--lld", "iscsi"}, args...)...)
	if err != nil {
		t.Fatalf("tgtadm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// stop shuts tgtd down (tgtpeer.Stop).
func (d *tgtd) stop(t *testing.T) {
	if tgtpeer.Stop(d.tgtadm, "iscsi", 1, d.done, func() { d.cmd.Process.Kill() }) {
		t.Logf("tgtd did not exit on tgtadm --op delete --mode system; killed")
	}
}

// run runs ddpinitiator and returns its combined output and exit status.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, initiatorProg.Path(t), args...)
	out, _ := c.CombinedOutput()
	return string(out), c.ProcessState.ExitCode()
}

// benchResult is what "ddpinitiator bench --json" prints.
type benchResult struct {
	IOs          int64   `json:"ios"`
	IOPS         float64 `json:"iops"`
	MBps         float64 `json:"mb_per_s"`
	Verified     bool    `json:"verified"`
	VerifyErrors int64   `json:"verify_errors"`
	P99          float64 `json:"lat_p99_us"`
}

// TestTgtOverTCP runs ddpinitiator over iSCSI/TCP against tgtd.
func TestTgtOverTCP(t *testing.T) {
	d := startTgtd(t)
	initiatorProg.Path(t)
	t.Run("discover", func(t *testing.T) {
		out, code := run(t, "discover", "--transport", "iscsi-tcp", d.addr)
		if code != 0 || !strings.Contains(out, targetName) || !strings.Contains(out, d.addr) {
			t.Fatalf("discover: exit %d\n%s", code, out)
		}
	})
	t.Run("login", func(t *testing.T) {
		out, code := run(t, "login", "--transport", "iscsi-tcp", "--target", targetName, d.addr)
		want := fmt.Sprintf("LUN %d: %d blocks of %d octets", diskLUN, lunSize/blockSize, blockSize)
		// tgt's LUN 0 is a controller (device type 0Ch), not a disk: the
		// report lists the disks only.
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "LUN 0:") {
			t.Fatalf("login: exit %d, want %q and no LUN 0\n%s", code, want, out)
		}
	})
	for _, c := range []struct {
		name, bs string
		depth    int
	}{
		{"bench 4KiB QD8", "4KiB", 8},
		{"bench 256KiB QD4", "256KiB", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, "bench", "--transport", "iscsi-tcp", "--target", targetName, "--lun", strconv.Itoa(diskLUN),
				"--rw", "randrw", "--verify", "--bs", c.bs, "--iodepth", strconv.Itoa(c.depth), "--runtime", "2s", "--json", d.addr)
			var res benchResult
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.IOs == 0 || !res.Verified || res.VerifyErrors != 0 {
				t.Fatalf("bench: exit %d, %+v\n%s", code, res, out)
			}
			t.Logf("%d I/Os, %.0f IOPS, %.1f MB/s, p99 %.0f µs, 0 verify errors", res.IOs, res.IOPS, res.MBps, res.P99)
		})
	}
	for _, c := range []struct {
		name        string
		hdr, data   bool
		immediate   bool
		description string
	}{
		{"backing file", false, false, true, "no digests"},
		{"backing file, digests", true, true, true, "CRC32C header and data digests"},
		{"backing file, digests, no immediate data", true, true, false, "digests, all write data by R2T"},
	} {
		t.Run(c.name, func(t *testing.T) { backingFile(t, d, c.hdr, c.data, !c.immediate) })
	}
	t.Run("mount fio verify", func(t *testing.T) { mountFio(t, d) })
}

// backingFile checks, in this process, that what is written through tgtd
// is in its backing file and that what is in the file reads back through
// tgtd, at sizes from one block to several bursts, with the digests and
// immediate data asked for.
func backingFile(t *testing.T, d *tgtd, hdr, data, noImmediate bool) {
	l := log.New()
	l.SetOutput(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, d.addr, initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, Buffers: 8 << 20, HeaderDigest: hdr, DataDigest: data, NoImmediateData: noImmediate, Log: log.NewEntry(l)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := s.Params(); p.HeaderDigest != hdr || p.DataDigest != data {
		t.Fatalf("negotiated digests %v/%v, want %v/%v", p.HeaderDigest, p.DataDigest, hdr, data)
	}
	f, err := os.OpenFile(d.file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	buf, err := s.Alloc(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free(buf)
	// Each size goes into its own stretch of the second half of the LU,
	// which the benches' 4 KiB-aligned regions may have used too.
	off := int64(lunSize / 2)
	for _, size := range []int{blockSize, 4096, 8192 + blockSize, 64 << 10, 256 << 10, 300 << 10, 1 << 20, 3 << 20} {
		want := make([]byte, size)
		rnd.Read(want)
		copy(buf, want)
		do(t, s, ctx, rw16(0x8a, off, size), initiator.DataOut, buf[:size])
		got := make([]byte, size)
		if _, err := f.ReadAt(got, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d octets written at %d through tgtd: the backing file differs at %d", size, off, firstDiff(got, want))
		}
		// And the other way: the file's new content, read through tgtd.
		rnd.Read(want)
		if _, err := f.WriteAt(want, off); err != nil {
			t.Fatal(err)
		}
		clear(buf[:size])
		do(t, s, ctx, rw16(0x88, off, size), initiator.DataIn, buf[:size])
		if !bytes.Equal(buf[:size], want) {
			t.Fatalf("%d octets at %d of the backing file read through tgtd differ at %d", size, off, firstDiff(buf[:size], want))
		}
		off += int64(size+4095) &^ 4095
	}
	if err := s.Logout(ctx); err != nil {
		t.Errorf("logout: %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// rw16 is a READ(16) or WRITE(16) CDB of n octets at octet offset off.
func rw16(op byte, off int64, n int) []byte {
	c := make([]byte, 16)
	c[0] = op
	binary.BigEndian.PutUint64(c[2:], uint64(off/blockSize))
	binary.BigEndian.PutUint32(c[10:], uint32(n/blockSize))
	return c
}

func do(t *testing.T, s *initiator.Session, ctx context.Context, cdb []byte, dir initiator.Direction, data []byte) {
	t.Helper()
	cmd := &initiator.Command{LUN: diskLUN, CDB: cdb, Dir: dir, Data: data}
	if err := s.Do(ctx, cmd); err != nil || cmd.Status != 0 {
		t.Fatalf("CDB %x: %v status %#x sense %x", cdb, err, cmd.Status, cmd.Sense)
	}
}

// mountFio mounts tgtd's LUN 1 with "ddpinitiator mount" over iSCSI/TCP
// (its configuration selects the LUN: LUN 0 is tgt's controller) and runs
// examples/fio/verify.fio on its file, as integration/daemon does against
// ddptarget.
func mountFio(t *testing.T, d *tgtd) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("this kernel has no FUSE: %v", err)
	}
	fio, err := exec.LookPath("fio")
	if err != nil {
		t.Skip("fio is not installed")
	}
	runDir, dir := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "initiator.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("initiator_name: %s\ntargets:\n  - name: %s\n    portals: [%s]\n    transport: iscsi-tcp\n    luns: [%d]\n",
		initiatorName, targetName, d.addr, diskLUN)), 0o644)
	out, code := run(t, "mount", "--daemon", "--run-dir", runDir, "--config", cfg, dir)
	file := filepath.Join(dir, fmt.Sprintf("lun%d", diskLUN))
	if code != 0 || !strings.Contains(out, file) {
		t.Fatalf("mount: exit %d\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(t, "umount", "--run-dir", runDir, dir); code != 0 {
			t.Errorf("umount: exit %d\n%s", code, out)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	job, err := filepath.Abs("../../examples/fio/verify.fio")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fio, "--output-format=json", job)
	cmd.Env = append(os.Environ(), "DDP_FILE="+file, "DDP_SIZE=32M")
	cmd.Dir = t.TempDir() // fio leaves its verify state files in its working directory
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fio: %v\n%s\n%s", err, stderr.String(), stdout.String())
	}
	guesttools.CheckFio(t, stdout.Bytes(), 3)
}
