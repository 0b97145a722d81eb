package iser

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/integration/guesttools"
	"github.com/ddpstore/ddpstore/integration/vmlab"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

const (
	// guestAddr is the vmlab guest's eth0, where siw0 is attached and our
	// target listens; traffic to it from the guest goes over lo.
	guestAddr    = "10.0.2.15"
	portal       = guestAddr + ":3260"
	targetIQN    = "iqn.2026-11.io.ddpstore:linux-interop"
	initiatorIQN = "iqn.2026-11.io.ddpstore:vmlab-linux"
	luSize       = 64 << 20
)

func inGuest(t *testing.T) {
	t.Helper()
	vmlab.InGuest(t, "Linux siw, ib_iser", "TestLinuxInitiator")
}

// TestGuestLinuxInitiator serves a 64 MiB memory LU with our iSER target on
// the guest's address and has Linux's initiator (ib_iser, iscsid,
// iscsiadm) discover it, log in over siw, write and read the disk with
// O_DIRECT, and log out. Every octet is checked against the store itself.
func TestGuestLinuxInitiator(t *testing.T) {
	inGuest(t)
	t.Cleanup(func() { logDmesg(t) })
	loadModules(t)
	if out, err := exec.Command("rdma", "link", "add", "siw0", "type", "siw", "netdev", "eth0").CombinedOutput(); err != nil &&
		!bytes.Contains(out, []byte("exist")) {
		t.Fatalf("rdma link add siw0: %v: %s", err, out)
	}

	tg := startTarget(t)
	is := &guesttools.Tools{Root: iscsiRoot(t)}
	guesttools.StartISCSID(t, is, initiatorIQN, guesttools.ISCSIDConf(10, 10), "-d", "1")

	// Discovery over iSER: a SendTargets in a Discovery session on an
	// iSER connection (RFC 7145 allows it; Linux runs it in the kernel).
	out, err := is.Run("iscsiadm", "-m", "discovery", "-t", "sendtargets", "-p", portal, "-I", "iser")
	t.Logf("iscsiadm discovery (%v):\n%s", err, out)
	if err != nil || !strings.Contains(out, targetIQN) {
		t.Fatalf("SendTargets discovery over iSER did not find %s", targetIQN)
	}
	node := []string{"-m", "node", "-T", targetIQN, "-p", portal, "-I", "iser"}
	out, err = is.Run("iscsiadm", append(node, "--login")...)
	t.Logf("iscsiadm login (%v):\n%s", err, out)
	if err != nil {
		t.Fatal("login failed")
	}
	loggedIn := true
	defer func() {
		if loggedIn {
			out, err := is.Run("iscsiadm", append(node, "--logout")...)
			t.Logf("iscsiadm logout at cleanup (%v):\n%s", err, out)
		}
	}()
	if out, err := is.Run("iscsiadm", "-m", "session", "-P", "3"); err == nil {
		t.Logf("session:\n%s", out)
	}
	dev := findDisk(t)
	t.Logf("Linux's disk: %s", dev)

	exerciseDisk(t, dev, tg)
	resets(t, dev, tg)
	dropAndRecover(t, dev, tg)

	// An idle spell, so that the keep-alive pings of both ends (Linux's
	// NOP-Out every noop_out_interval, our NOP-In after NopInterval of
	// silence) cross the connection before the logout. What was seen is
	// logged, not asserted: it depends on timing.
	time.Sleep(12 * time.Second)

	out, err = is.Run("iscsiadm", append(node, "--logout")...)
	t.Logf("iscsiadm logout (%v):\n%s", err, out)
	if err != nil {
		t.Fatal("logout failed")
	}
	loggedIn = false
	tg.waitIdle(t)

	// Once more with ImmediateData=No on Linux's side: every write's data
	// is then fetched by RDMA Read, from a Write Base Offset at the start
	// of Linux's buffer.
	out, err = is.Run("iscsiadm", append(node, "-o", "update", "-n", "node.session.iscsi.ImmediateData", "-v", "No")...)
	if err != nil {
		t.Fatalf("iscsiadm -o update ImmediateData=No: %v: %s", err, out)
	}
	out, err = is.Run("iscsiadm", append(node, "--login")...)
	t.Logf("iscsiadm login with ImmediateData=No (%v):\n%s", err, out)
	if err != nil {
		t.Fatal("second login failed")
	}
	loggedIn = true
	if out, err := is.Run("iscsiadm", "-m", "session", "-P", "3"); err == nil && !strings.Contains(out, "ImmediateData: No") {
		t.Errorf("the second session did not negotiate ImmediateData=No:\n%s", out)
	}
	dev = findDisk(t)
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeReadBack(t, fd, tg, rand.New(rand.NewPCG(5, 6)), []int{512, 4 << 10, 12 << 10, 64 << 10, 1 << 20})
	unix.Close(fd)
	out, err = is.Run("iscsiadm", append(node, "--logout")...)
	t.Logf("iscsiadm logout (%v):\n%s", err, out)
	if err != nil {
		t.Fatal("second logout failed")
	}
	loggedIn = false
	tg.waitIdle(t)
	tg.checkLog(t, 2)
}

// loadModules insmods the modules the host copied into the shared
// directory (modules/modules.order), skipping those already loaded.
func loadModules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(modulesDir, modulesList))
	if err != nil {
		t.Fatalf("the host's module list: %v", err)
	}
	for _, ko := range strings.Fields(string(b)) {
		if _, err := os.Stat(filepath.Join("/sys/module", vmlab.ModuleName(ko))); err == nil {
			continue
		}
		if out, err := exec.Command("insmod", filepath.Join(modulesDir, ko)).CombinedOutput(); err != nil {
			t.Fatalf("insmod %s: %v: %s", ko, err, out)
		}
	}
	if _, err := os.Stat("/sys/class/iscsi_transport/iser"); err != nil {
		t.Fatalf("ib_iser loaded but no iser iSCSI transport: %v", err)
	}
}

// testTarget is our target, in this process, with its log kept.
type testTarget struct {
	srv     *target.Server
	exports []target.Export
	store   *blockdev.Memory
	model   []byte // what the LU should hold
	log     *logHook
	// expectedWarnings are warnings the test caused on purpose; dropped
	// counts the sessions it dropped, which Linux logs in again.
	expectedWarnings, dropped int
}

func startTarget(t *testing.T) *testTarget {
	store, err := blockdev.NewMemory(luSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tt := &testTarget{store: store, model: make([]byte, luSize), log: &logHook{}}
	// Known content, so that reads are checked from the first one.
	guesttools.Fill(rand.New(rand.NewPCG(1, 2)), tt.model)
	copy(store.Mapping().Bytes(), tt.model)
	l, err := lu.New(1, store)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := lu.NewTarget(targetIQN, map[uint16]*lu.LU{0: l})
	if err != nil {
		t.Fatal(err)
	}
	logger := log.New()
	logger.SetLevel(log.DebugLevel)
	logger.SetOutput(tt.log)
	logger.AddHook(tt.log)
	// gotgt logs on logrus's standard logger: count its errors too.
	log.StandardLogger().AddHook(tt.log)
	log.StandardLogger().SetOutput(tt.log)
	t.Cleanup(func() {
		log.StandardLogger().ReplaceHooks(log.LevelHooks{})
		log.StandardLogger().SetOutput(os.Stderr)
	})
	dev := iwarp.NewDevice(0)
	ln, err := dev.Listen("tcp", portal, iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tt.exports = []target.Export{{Target: tg, Alias: "ddpstore-interop"}}
	tt.srv, err = target.NewServer(dev, target.Config{
		Exports: tt.exports,
		Portals: []login.Portal{{Addr: portal, TPGT: 1}},
		Log:     log.NewEntry(logger),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tt.srv.Serve(ln) }()
	t.Cleanup(func() {
		tt.srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		dev.Close()
		t.Logf("target log:\n%s", tt.log.text())
	})
	return tt
}

// waitIdle waits for the target to have no connection left.
func (tt *testTarget) waitIdle(t *testing.T) {
	for deadline := time.Now().Add(20 * time.Second); tt.srv.Sessions() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the target still serves %d connections 20 s after the logout", tt.srv.Sessions())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLog fails the test on any warning or error the target logged
// beyond those the test caused, and unless every Normal session but those
// the test dropped ended with a Logout. open-iscsi ends a
// SendTargets discovery session by disconnecting, without a Logout
// (usr/discovery.c, iscsi_destroy_session), so a discovery connection may
// just end (docs/interop.md).
func (tt *testTarget) checkLog(t *testing.T, sessions int) {
	text := tt.log.text()
	if n := tt.log.bad() - tt.expectedWarnings; n != 0 {
		t.Errorf("the target (or gotgt) logged %d warnings or errors (log below)", n)
	}
	var normal, logouts int
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.Contains(line, "Normal session logged in"):
			normal++
		case strings.Contains(line, "connection closed after logout") && strings.Contains(line, targetIQN):
			logouts++
		}
	}
	t.Logf("target: %d Normal session logins, %d ended by a Logout; NOP-Out pings from Linux: %d, answers to our NOP-In pings: %d",
		normal, logouts, strings.Count(text, "NOP-Out ping"), strings.Count(text, "NOP-Out answers our ping"))
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "task management function") && !strings.Contains(line, "response 0\"") {
			t.Errorf("a task management function did not complete: %s", line)
		}
	}
	if normal != sessions+tt.dropped || logouts != sessions {
		t.Errorf("want %d Normal session logins (%d dropped by the test and logged in again) and %d clean Logouts; saw %d logins and %d logouts",
			sessions+tt.dropped, tt.dropped, sessions, normal, logouts)
	}
}

// logHook keeps the target's log and counts its warnings and errors.
type logHook struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	warn int
}

func (h *logHook) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

func (h *logHook) Levels() []log.Level {
	return []log.Level{log.PanicLevel, log.FatalLevel, log.ErrorLevel, log.WarnLevel}
}

func (h *logHook) Fire(*log.Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warn++
	return nil
}

func (h *logHook) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

func (h *logHook) bad() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warn
}

// iscsiRoot is where the host copied open-iscsi's programs.
func iscsiRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, iscsiDir)
}

// findDisk waits for the SCSI disk of the iSCSI session to appear and
// returns its device node.
func findDisk(t *testing.T) string {
	for deadline := time.Now().Add(30 * time.Second); ; {
		blocks, _ := filepath.Glob("/sys/class/iscsi_session/session*/device/target*/*:*:*:*/block/*")
		if len(blocks) > 1 {
			t.Fatalf("more than one disk in the session: %v", blocks)
		}
		if len(blocks) == 1 {
			name := filepath.Base(blocks[0])
			b, err := os.ReadFile(filepath.Join("/sys/block", name, "size"))
			if err != nil {
				t.Fatal(err)
			}
			sectors, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if sectors*512 != luSize {
				t.Fatalf("%s has %d sectors of 512 octets, want %d octets", name, sectors, luSize)
			}
			dev := "/dev/" + name
			if _, err := os.Stat(dev); err == nil {
				return dev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no disk of the iSCSI session 30 s after the login (found %v)", blocks)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exerciseDisk writes and reads the disk with O_DIRECT and checks every
// octet against the store behind the target.
func exerciseDisk(t *testing.T, dev string, tt *testTarget) {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const maxIO = 1 << 20
	buf := guesttools.AlignedBuf(t, maxIO)
	store := tt.store.Mapping().Bytes()

	// The whole disk, read as Linux sees it: the known content.
	start := time.Now()
	for off := 0; off < luSize; off += maxIO {
		pread(t, fd, buf, off)
		if !bytes.Equal(buf, tt.model[off:off+maxIO]) {
			t.Fatalf("read of %d octets at %d: %s", maxIO, off, guesttools.Diff(buf, tt.model[off:off+maxIO]))
		}
	}
	t.Logf("sequential 1 MiB reads of the whole disk: %.1f MB/s (informative: TCG guest)", mbps(luSize, time.Since(start)))

	rng := rand.New(rand.NewPCG(3, 4))
	writeReadBack(t, fd, tt, rng, []int{4 << 10, 8 << 10, 12 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20})

	// Sequential writes of half the disk, 1 MiB at a time.
	start = time.Now()
	for off := 0; off < luSize/2; off += maxIO {
		guesttools.Fill(rng, buf)
		pwrite(t, fd, buf, off)
		copy(tt.model[off:], buf)
	}
	t.Logf("sequential 1 MiB writes of half the disk: %.1f MB/s (informative: TCG guest)", mbps(luSize/2, time.Since(start)))

	// A mix in time: goroutines with their own regions, each doing
	// reads and writes of assorted sizes at once, so that commands,
	// RDMA Reads of write data and RDMA Writes of read data interleave
	// on the connection.
	for _, e := range mix(t, fd, tt, 48, 99, nil) {
		t.Error(e)
	}
	if err := unix.Fsync(fd); err != nil {
		t.Errorf("fsync (SYNCHRONIZE CACHE): %v", err)
	}
	if !bytes.Equal(store[:luSize], tt.model) {
		t.Errorf("after the mix, the store differs from what was written: %s", guesttools.Diff(store[:luSize], tt.model))
	}
}

// dropAndRecover has the target drop Linux's connection (a configuration
// reload without the export, then with it again) while four workers have
// reads and writes in flight, and checks that Linux recovers the session
// and completes every one of them: no I/O error, reads equal to the model,
// and the store equal to it at the end. Linux fails queued I/O after the
// replacement_timeout of iscsid.conf (10 s), so nothing can hang.
func dropAndRecover(t *testing.T, dev string, tt *testTarget) {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	start := time.Now()
	var recovered time.Duration
	errs := mix(t, fd, tt, 32, 77, func() {
		// Let the workers get commands in flight first.
		time.Sleep(2 * time.Second)
		warned := tt.log.bad()
		if err := tt.srv.SetExports(nil); err != nil {
			t.Error(err)
			return
		}
		dropped := time.Now()
		for deadline := dropped.Add(20 * time.Second); tt.srv.Sessions() > 0; {
			if time.Now().After(deadline) {
				t.Errorf("the target still serves %d connections 20 s after the export was withdrawn", tt.srv.Sessions())
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := tt.srv.SetExports(tt.exports); err != nil {
			t.Error(err)
			return
		}
		tt.expectedWarnings += tt.log.bad() - warned // "connection dropped"
		tt.dropped++
		for deadline := time.Now().Add(20 * time.Second); tt.srv.Sessions() == 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		recovered = time.Since(dropped)
	})
	for _, e := range errs {
		t.Errorf("mix across the drop: %s", e)
	}
	if tt.srv.Sessions() == 0 {
		t.Fatal("Linux did not log in again after the drop")
	}
	t.Logf("a mix of I/O across a target-side drop: Linux back %.1f s after the drop, mix done in %.1f s (informative)",
		recovered.Seconds(), time.Since(start).Seconds())
	if store := tt.store.Mapping().Bytes(); !bytes.Equal(store[:luSize], tt.model) {
		t.Errorf("after the drop and recovery, the store differs from what was written: %s", guesttools.Diff(store[:luSize], tt.model))
	}
}

// mix runs four workers, each in its own quarter of the disk, doing ops
// reads and writes of 512 B to 1 MiB at 512-byte offsets, and returns what
// went wrong. Reads are checked against the model, which writes update.
// during, when not nil, runs beside the workers.
func mix(t *testing.T, fd int, tt *testTarget, ops int, seed uint64, during func()) []string {
	const workers, maxIO = 4, 1 << 20
	region := luSize / workers
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		b := guesttools.AlignedBuf(t, maxIO) // here: t.Fatal only on the test's goroutine
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			base := w * region
			for range ops {
				size := 512 * (1 + rng.IntN(maxIO/512))
				off := base + 512*rng.IntN((region-size)/512+1)
				want := tt.model[off : off+size] // this worker's region only
				if rng.IntN(2) == 0 {
					guesttools.Fill(rng, b[:size])
					if _, err := unix.Pwrite(fd, b[:size], int64(off)); err != nil {
						errs <- fmt.Sprintf("write of %d at %d: %v", size, off, err)
						return
					}
					copy(want, b[:size])
					continue
				}
				if n, err := unix.Pread(fd, b[:size], int64(off)); err != nil || n != size {
					errs <- fmt.Sprintf("read of %d at %d: %d, %v", size, off, n, err)
					return
				}
				if !bytes.Equal(b[:size], want) {
					errs <- fmt.Sprintf("read of %d at %d: %s", size, off, guesttools.Diff(b[:size], want))
					return
				}
			}
		}()
	}
	if during != nil {
		during()
	}
	wg.Wait()
	close(errs)
	var out []string
	for e := range errs {
		out = append(out, e)
	}
	return out
}

// writeReadBack writes each size once and reads it back, at offsets that
// are multiples of 512 but rarely of the size, checking the store after
// the write and the read-back against the model.
func writeReadBack(t *testing.T, fd int, tt *testTarget, rng *rand.Rand, sizes []int) {
	store := tt.store.Mapping().Bytes()
	buf := guesttools.AlignedBuf(t, 1<<20)
	for _, size := range sizes {
		off := (1 + rng.IntN(luSize/512-1-size/512)) * 512
		b := buf[:size]
		guesttools.Fill(rng, b)
		pwrite(t, fd, b, off)
		copy(tt.model[off:], b)
		if !bytes.Equal(store[off:off+size], b) {
			t.Fatalf("write of %d octets at %d: the store holds %s", size, off, guesttools.Diff(store[off:off+size], b))
		}
		clear(b)
		pread(t, fd, b, off)
		if !bytes.Equal(b, tt.model[off:off+size]) {
			t.Fatalf("read-back of %d octets at %d: %s", size, off, guesttools.Diff(b, tt.model[off:off+size]))
		}
	}
}

// resets has Linux's SCSI error handler send task management functions:
// SG_SCSI_RESET on the disk makes libiscsi send LOGICAL UNIT RESET
// (device reset) and TARGET WARM RESET (target reset) to our target. Each
// must succeed without dropping the session, and the disk must still read
// right after it.
func resets(t *testing.T, dev string, tt *testTarget) {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := guesttools.AlignedBuf(t, 64<<10)
	for _, r := range []struct {
		name string
		kind int // SG_SCSI_RESET_*
		fn   int // the TMF function code the target should see
	}{
		{"device reset", 1, 5}, // SG_SCSI_RESET_DEVICE: LOGICAL UNIT RESET
		{"target reset", 4, 6}, // SG_SCSI_RESET_TARGET: TARGET WARM RESET
	} {
		const sgSCSIReset = 0x2284
		if err := unix.IoctlSetPointerInt(fd, sgSCSIReset, r.kind); err != nil {
			t.Errorf("SG_SCSI_RESET (%s): %v", r.name, err)
			continue
		}
		want := fmt.Sprintf("task management function %d (ITT", r.fn)
		if !strings.Contains(tt.log.text(), want) {
			t.Errorf("%s: the target saw no task management function %d", r.name, r.fn)
		}
		off := 5 << 20
		pread(t, fd, buf, off)
		if !bytes.Equal(buf, tt.model[off:off+len(buf)]) {
			t.Errorf("read after the %s: %s", r.name, guesttools.Diff(buf, tt.model[off:off+len(buf)]))
		}
	}
}

func pread(t *testing.T, fd int, b []byte, off int) {
	t.Helper()
	if n, err := unix.Pread(fd, b, int64(off)); err != nil || n != len(b) {
		t.Fatalf("read of %d octets at %d: %d, %v", len(b), off, n, err)
	}
}

func pwrite(t *testing.T, fd int, b []byte, off int) {
	t.Helper()
	if n, err := unix.Pwrite(fd, b, int64(off)); err != nil || n != len(b) {
		t.Fatalf("write of %d octets at %d: %d, %v", len(b), off, n, err)
	}
}

func mbps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// logDmesg logs what the kernel said about the session.
func logDmesg(t *testing.T) {
	out, err := exec.Command("dmesg").CombinedOutput()
	if err != nil {
		t.Logf("dmesg: %v", err)
		return
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "iser") || strings.Contains(l, "iscsi") || strings.Contains(l, "siw") ||
			strings.Contains(l, "scsi") || strings.Contains(l, " sd") {
			keep = append(keep, line)
		}
	}
	t.Logf("kernel log (iSER, iSCSI, siw, SCSI):\n%s", strings.Join(keep, "\n"))
}
