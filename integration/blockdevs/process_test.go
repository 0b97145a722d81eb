package blockdevs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/blockdev"
	"golang.org/x/sys/unix"
)

// The LUN that ddptarget serves from a file in processRoundTrip: ext4
// takes the first procFSSize octets, and the raw writer of the kill writes
// the rest while the file system is mounted.
const (
	procLUNSize    = 96 << 20
	procFSSize     = 64 << 20
	procTargetName = "iqn.2026-11.io.ddpstore:blockdevs"
	rawBlock       = 64 << 10 // the raw writer's block
	rawWorkers     = 4        // its writes in flight
)

// TestGuestProcess runs inside the guest, booted by TestUblk with nbd.ko
// loaded too (fio and its libraries come in once per boot):
// processRoundTrip with "attach --nbd", then with "attach --ublk".
func TestGuestProcess(t *testing.T) {
	inGuest(t)
	t.Run("NBD", func(t *testing.T) { processRoundTrip(t, "nbd") })
	t.Run("Ublk", func(t *testing.T) { processRoundTrip(t, "ublk") })
}

// processRoundTrip attaches a LUN of ddptarget, run as a process with a
// file-backed store, with "ddpinitiator attach --KIND"; verifies it with
// fio raw (its first 7 MiB) and through ext4; then kills ddptarget with SIGKILL while two
// writers run on the device and starts it again on the same file (see
// killTarget for what is asserted and why); then detaches and checks the
// file system in the target's file with e2fsck -fn.
func processRoundTrip(t *testing.T, kind string) {
	e := haveExt4(t)
	if e == nil {
		t.Skip("no mke2fs or ext4 module from the host")
	}
	dir := t.TempDir() // tmpfs in the guest
	tgt := newProcessTarget(t, dir)
	tgt.start(t)
	defer tgt.stop(t)
	runDir := filepath.Join(dir, "run")
	common := []string{"--run-dir", runDir}
	out, _, code := ddpinitiator(t, append([]string{"attach", "--" + kind, "--target", procTargetName, "--queue-depth", "16"}, append(common, tgt.addr)...)...)
	if code != 0 {
		t.Fatalf("attach --%s failed", kind)
	}
	dev := strings.TrimSpace(out)
	attached := true
	defer func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
			for _, p := range logs {
				b, _ := os.ReadFile(p)
				t.Logf("%s:\n%s", p, b)
			}
			b, _ := os.ReadFile(tgt.logPath)
			t.Logf("ddptarget's log:\n%s", b)
		}
		if attached {
			ddpinitiator(t, append([]string{"detach"}, append(common, dev)...)...)
		}
	}()
	checkGeometry(t, dev, procLUNSize, blockdev.BlockSize)

	fio := haveFio(t)
	if fio != "" {
		runFio(t, fio, dev, "", []fioJob{{"4k", 4 << 10, 1 << 20, 0}, {"64k", 64 << 10, 2 << 20, 1 << 20}, {"1m", 1 << 20, 4 << 20, 3 << 20}})
	}

	e.mkfs(t, dev, fmt.Sprintf("%dk", procFSSize>>10))
	mnt := t.TempDir()
	mountExt4(t, dev, mnt)
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	}()
	if fio != "" {
		runFio(t, fio, "", mnt, []fioJob{{"4k", 4 << 10, 1 << 20, 0}, {"64k", 64 << 10, 2 << 20, 0}, {"1m", 1 << 20, 4 << 20, 0}})
		ents, _ := os.ReadDir(mnt)
		for _, de := range ents {
			if strings.HasSuffix(de.Name(), ".fio") {
				os.Remove(filepath.Join(mnt, de.Name()))
			}
		}
	}

	raw, files := killTarget(t, tgt, dev, mnt, runDir)

	umount(t, mnt)
	dropCaches()
	mountExt4(t, dev, mnt)
	files.check(t)
	umount(t, mnt)
	mounted = false

	out, _, code = ddpinitiator(t, append([]string{"detach"}, append(common, dev)...)...)
	if code != 0 || !strings.Contains(out, "detached "+dev) {
		t.Fatalf("detach %s: exit %d, %q", dev, code, out)
	}
	attached = false
	tgt.stop(t)
	raw.checkStore(t, tgt.img)
	e.fsck(t, tgt.img)
}

// killTarget is the target killed mid-write and started again.
//
// While two writers run on dev - rawWriter with O_DIRECT in the LUN's
// last 32 MiB, beyond the file system, and fileWriter writing and fsyncing
// files in the ext4 mounted at mnt - ddptarget gets SIGKILL, stays down
// for 3 s and is started again on the same file. The writers go on until
// each has completed more after the restart. Asserted:
//
//   - No write and no fsync returns an error, the kernel logs no I/O
//     error and ext4 counts none: the initiator holds the commands the
//     kill left unanswered, logs in again when the target listens (within
//     its recovery_timeout, 30 s) and sends them again, so the device
//     completes them late rather than failing them.
//   - While the target is down at most the writes already answered
//     complete (one per raw worker, one fsync): I/O waited for it.
//   - Every write acknowledged to the writer - a pwrite that returned, a
//     file whose fsync returned - reads back intact afterwards, through
//     the device, from a fresh mount, and from the target's file itself.
//
// That is the contract because an acknowledgement means the target
// answered the WRITE with GOOD, and ddptarget answers a WRITE only after
// its pwrite(2) into the store file returned (on tmpfs, as here, a write
// of a few KiB is a store into the file's shared mapping instead: the
// same pages): the data is then in the kernel's page cache of that file,
// which outlives the process, and the next ddptarget maps the same pages. A kill -9 of the target loses
// nothing acknowledged. What it does not cover is the host's crash: data
// survives that only after a FLUSH (fsync on the initiator, SYNCHRONIZE
// CACHE at the target, msync of the range there), which a kill does not
// exercise.
func killTarget(t *testing.T, tgt *processTarget, dev, mnt, runDir string) (*rawWriter, *fileWriter) {
	km := openKmsg(t)
	defer km.close()
	raw := newRawWriter(t, dev, procFSSize, procLUNSize-procFSSize)
	files := &fileWriter{dir: filepath.Join(mnt, "acked")}
	if err := os.Mkdir(files.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	raw.run(&wg)
	wg.Add(1)
	go func() { defer wg.Done(); files.run() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		raw.stop.Store(true)
		files.stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			t.Fatalf("the writers have not stopped 90 s after they were told to (raw: %d acknowledged, files: %d)", raw.acked.Load(), files.count.Load())
		}
	}
	defer stop()

	progress := func(what string, raws, fs int64, limit time.Duration) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for raw.acked.Load() < raws || files.count.Load() < fs {
			if err := errors.Join(raw.error(), files.error()); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after %v the raw writer has %d writes acknowledged (want %d), the file writer %d files (want %d)",
					what, limit, raw.acked.Load(), raws, files.count.Load(), fs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	progress("before the kill", 32, 2, 60*time.Second)

	tgt.kill(t)
	killed := time.Now()
	rawAtKill, filesAtKill := raw.acked.Load(), files.count.Load()
	time.Sleep(3 * time.Second)
	rawDown, filesDown := raw.acked.Load()-rawAtKill, files.count.Load()-filesAtKill
	if err := errors.Join(raw.error(), files.error()); err != nil {
		t.Fatalf("while the target was down: %v", err)
	}
	t.Logf("ddptarget killed with %d raw writes and %d fsync'ed files acknowledged; while it was down %d raw writes and %d files completed",
		rawAtKill, filesAtKill, rawDown, filesDown)
	if rawDown > rawWorkers || filesDown > 1 {
		t.Errorf("while the target was down %d raw writes (at most %d in flight at the kill) and %d fsyncs (at most 1) completed: what completed them?",
			rawDown, rawWorkers, filesDown)
	}

	tgt.start(t)
	restarted := time.Now()
	rawAtRestart := raw.acked.Load()
	for raw.acked.Load() == rawAtRestart && time.Since(restarted) < 60*time.Second && raw.error() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	resumed := time.Now()
	progress("after the restart", rawAtRestart+32, files.count.Load()+2, 60*time.Second)
	stop()
	if err := errors.Join(raw.error(), files.error()); err != nil {
		t.Fatalf("writing across the kill and restart: %v", err)
	}
	t.Logf("I/O resumed %.1f s after the kill, %.1f s after the restart; in all %d raw writes of %d KiB (%d blocks last written before the kill) and %d fsync'ed files acknowledged",
		resumed.Sub(killed).Seconds(), resumed.Sub(restarted).Seconds(), raw.acked.Load(), rawBlock>>10, raw.writtenBefore(rawAtKill), files.count.Load())

	if b, err := os.ReadFile(filepath.Join("/sys/fs/ext4", filepath.Base(dev), "errors_count")); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Errorf("ext4 on %s counts %s errors", dev, strings.TrimSpace(string(b)))
	}
	raw.checkDevice(t)
	raw.close() // an open ublk device is not deleted until its last close
	logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
	var ilog []byte
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		ilog = append(ilog, b...)
	}
	if !bytes.Contains(ilog, []byte("connection lost")) {
		t.Errorf("the initiator's log does not say it lost the connection:\n%s", ilog)
	}
	for _, l := range km.lines() {
		if strings.Contains(l, "I/O error") || strings.Contains(l, "EXT4-fs error") || strings.Contains(l, "EXT4-fs warning") {
			t.Errorf("kernel: %s", l)
		} else {
			t.Logf("kernel: %s", l)
		}
	}
	return raw, files
}

// processTarget is ddptarget run as a process, serving one file LUN;
// started again it serves the same file.
type processTarget struct {
	bin, cfg, addr, img, logPath string
	cmd                          *exec.Cmd
	done                         chan struct{}
	n                            int
}

func newProcessTarget(t *testing.T, dir string) *processTarget {
	// Copied out of the 9p share, where each start would page the
	// binary in again.
	src, _ := filepath.Abs(targetBin)
	bin := filepath.Join(dir, targetBin)
	if err := copyFile(src, bin); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &processTarget{bin: bin, addr: addr, img: filepath.Join(dir, "lun0.img"),
		cfg: filepath.Join(dir, "target.yaml"), logPath: filepath.Join(dir, "ddptarget.log")}
	cfg := fmt.Sprintf("portals:\n  - listen: %s\ntargets:\n  - name: %s\n    luns:\n      - {id: 0, path: %s, size: %d}\ncontrol: {socket: %s}\n",
		addr, procTargetName, p.img, procLUNSize, filepath.Join(dir, "ddptarget.sock"))
	if err := os.WriteFile(p.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// start starts ddptarget and waits until it listens.
func (p *processTarget) start(t *testing.T) {
	t.Helper()
	lf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.n++
	fmt.Fprintf(lf, "==== test: ddptarget incarnation %d\n", p.n)
	p.cmd = exec.Command(p.bin, "--config", p.cfg)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("starting ddptarget: %v", err)
	}
	lf.Close()
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(p.cmd)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(p.logPath)
			t.Fatalf("ddptarget exited (%v) before it listened:\n%s", p.cmd.ProcessState, b)
		default:
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			b, _ := os.ReadFile(p.logPath)
			t.Fatalf("ddptarget does not listen on %s 30 s after its start:\n%s", p.addr, b)
		}
	}
	t.Logf("ddptarget (pid %d) listens on %s, %.1f s after its start", p.cmd.Process.Pid, p.addr, time.Since(start).Seconds())
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *processTarget) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 ddptarget: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("ddptarget still runs 10 s after SIGKILL")
	}
}

// stop shuts a running ddptarget down with SIGTERM; it must exit 0.
func (p *processTarget) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("ddptarget did not exit within 30 s of SIGTERM")
		return
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		b, _ := os.ReadFile(p.logPath)
		t.Errorf("ddptarget exited %d after SIGTERM:\n%s", code, b)
	}
}

// rawWriter writes rawBlock blocks over [off, off+size) of a device with
// O_DIRECT from rawWorkers goroutines, pass after pass, each block a
// pattern of its index and its pass (its generation); it remembers the
// generation of each block's last acknowledged write.
type rawWriter struct {
	t          *testing.T
	dev        string
	fd         int
	off        int64
	blocks     int64
	next       atomic.Int64 // the next write: block next%blocks, generation next/blocks
	acked      atomic.Int64
	stop       atomic.Bool
	mu         []sync.Mutex // per block: its write and its gen
	gen        []int64      // per block: the generation last acknowledged, -1 for none
	seq        []int64      // per block: acked's count when it was
	errMu      sync.Mutex
	err        error
	bufs       [][]byte
	readBuf    []byte
	expectBuf  []byte
	storeBlock []byte
}

func newRawWriter(t *testing.T, dev string, off, size int64) *rawWriter {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := &rawWriter{t: t, dev: dev, fd: fd, off: off, blocks: size / rawBlock}
	w.mu = make([]sync.Mutex, w.blocks)
	w.gen = make([]int64, w.blocks)
	w.seq = make([]int64, w.blocks)
	for i := range w.gen {
		w.gen[i] = -1
	}
	for range rawWorkers {
		w.bufs = append(w.bufs, alignedBuf(t, rawBlock))
	}
	w.readBuf = alignedBuf(t, rawBlock)
	w.expectBuf = make([]byte, rawBlock)
	t.Cleanup(w.close)
	return w
}

func (w *rawWriter) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// fillBlock is block b's content in generation g: its index and
// generation, then pseudo-random octets.
func fillBlock(p []byte, b, g int64) {
	rng := rand.New(rand.NewPCG(uint64(b), uint64(g)+0x5eed))
	for i := 0; i < len(p); i += 8 {
		*(*uint64)(unsafe.Pointer(&p[i])) = rng.Uint64()
	}
	*(*int64)(unsafe.Pointer(&p[0])) = b
	*(*int64)(unsafe.Pointer(&p[8])) = g
}

func (w *rawWriter) run(wg *sync.WaitGroup) {
	for i := range rawWorkers {
		buf := w.bufs[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !w.stop.Load() {
				n := w.next.Add(1) - 1
				b, g := n%w.blocks, n/w.blocks
				fillBlock(buf, b, g)
				w.mu[b].Lock()
				k, err := unix.Pwrite(w.fd, buf, w.off+b*rawBlock)
				if err == nil && k != len(buf) {
					err = fmt.Errorf("short write: %d of %d", k, len(buf))
				}
				if err != nil {
					w.mu[b].Unlock()
					w.fail(fmt.Errorf("pwrite O_DIRECT of %d KiB at %d on %s: %w", rawBlock>>10, w.off+b*rawBlock, w.dev, err))
					return
				}
				w.gen[b] = g
				w.seq[b] = w.acked.Add(1)
				w.mu[b].Unlock()
			}
		}()
	}
}

func (w *rawWriter) fail(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *rawWriter) error() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// writtenBefore counts the blocks whose last acknowledged write was among
// the first n.
func (w *rawWriter) writtenBefore(n int64) int {
	c := 0
	for b := range w.blocks {
		if w.gen[b] >= 0 && w.seq[b] <= n {
			c++
		}
	}
	return c
}

// checkDevice reads every written block back through the device with
// O_DIRECT (from the restarted target).
func (w *rawWriter) checkDevice(t *testing.T) {
	t.Helper()
	bad := 0
	for b := range w.blocks {
		if w.gen[b] < 0 {
			continue
		}
		if _, err := unix.Pread(w.fd, w.readBuf, w.off+b*rawBlock); err != nil {
			t.Fatalf("pread of block %d on %s: %v", b, w.dev, err)
		}
		fillBlock(w.expectBuf, b, w.gen[b])
		if !bytes.Equal(w.readBuf, w.expectBuf) {
			if bad++; bad <= 5 {
				t.Errorf("block %d (at %d) of %s reads back as block %d generation %d, want generation %d (acknowledged as write %d)",
					b, w.off+b*rawBlock, w.dev, *(*int64)(unsafe.Pointer(&w.readBuf[0])), *(*int64)(unsafe.Pointer(&w.readBuf[8])), w.gen[b], w.seq[b])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d blocks of %s do not read back as last acknowledged", bad, w.blocks, w.dev)
	}
}

// checkStore checks the same in the target's store file.
func (w *rawWriter) checkStore(t *testing.T, img string) {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bad := 0
	for b := range w.blocks {
		if w.gen[b] < 0 {
			continue
		}
		if _, err := f.ReadAt(w.readBuf, w.off+b*rawBlock); err != nil {
			t.Fatalf("reading block %d of %s: %v", b, img, err)
		}
		fillBlock(w.expectBuf, b, w.gen[b])
		if !bytes.Equal(w.readBuf, w.expectBuf) {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d blocks in the target's file %s are not as last acknowledged", bad, w.blocks, img)
	}
}

// fileWriter writes files of 64 to 256 KiB into dir, each fsync'ed
// (and the directory after it): a file counts once its fsync returned.
type fileWriter struct {
	dir   string
	stop  atomic.Bool
	count atomic.Int64
	mu    sync.Mutex
	sizes []int // of the files acknowledged, by number
	err   error
}

func (w *fileWriter) run() {
	for i := 0; !w.stop.Load(); i++ {
		size := (1 + i%4) << 16
		if err := w.write(i, fileData(uint64(1000+i), size)); err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		w.sizes = append(w.sizes, size)
		w.mu.Unlock()
		w.count.Add(1)
	}
}

func (w *fileWriter) write(i int, data []byte) error {
	f, err := os.Create(filepath.Join(w.dir, fmt.Sprintf("f%05d", i)))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file %d: %w", i, err)
	}
	d, err := os.Open(w.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync of %s: %w", w.dir, err)
	}
	return nil
}

func (w *fileWriter) error() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// check reads back every acknowledged file (from a fresh mount).
func (w *fileWriter) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, size := range w.sizes {
		checkFile(t, filepath.Join(w.dir, fmt.Sprintf("f%05d", i)), fileData(uint64(1000+i), size))
	}
	t.Logf("%d fsync'ed files read back intact from a fresh mount", len(w.sizes))
}

// kmsg reads the kernel's log from where it was opened.
type kmsg struct{ fd int }

func openKmsg(t *testing.T) *kmsg {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/kmsg: %v", err)
	}
	unix.Seek(fd, 0, io.SeekEnd)
	return &kmsg{fd: fd}
}

func (k *kmsg) close() { unix.Close(k.fd) }

// lines returns the messages logged since the last call.
func (k *kmsg) lines() []string {
	var out []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(k.fd, buf)
		if err == unix.EPIPE {
			continue // overwritten: go on from the oldest left
		}
		if err != nil || n <= 0 {
			return out
		}
		rec := string(buf[:n])
		if i := strings.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		rec, _, _ = strings.Cut(rec, "\n")
		out = append(out, rec)
	}
}

// copyFile copies src to dst, executable (out of the 9p share into the
// guest's tmpfs).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	// Reads of 4 MiB: over 9p (msize 512000) a read costs a round trip
	// to qemu whatever its size, and the 32 KiB of io.Copy make the
	// 80 MiB of fio's libraries take ten times as long under TCG.
	if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, 4<<20)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fioRoot is where haveFio copied fio and its libraries in the guest.
var (
	fioOnce sync.Once
	fioRoot string
	fioErr  error
)

// haveFio copies the fio the host provided into the guest's tmpfs, once
// per boot (run from the 9p share its 80 MiB of libraries take half a
// minute to load each time), and returns its directory, or "" when the
// host had none.
func haveFio(t *testing.T) string {
	fioOnce.Do(func() {
		src, _ := filepath.Abs(fioDir)
		if _, err := os.Stat(filepath.Join(src, "bin", "fio")); err != nil {
			fioErr = err
			return
		}
		start := time.Now()
		dst := filepath.Join(os.TempDir(), "blockdevs-fio")
		fioErr = filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if fi.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			return copyFile(p, filepath.Join(dst, rel))
		})
		if fioErr == nil {
			fioRoot = dst
			out, _ := fioCommand(dst, "--version").CombinedOutput()
			t.Logf("%s: copied into %s and started in %.1f s", strings.TrimSpace(string(out)), dst, time.Since(start).Seconds())
		}
	})
	if fioRoot == "" {
		t.Logf("no fio from the host (%v): the fio verify runs are left out", fioErr)
	}
	return fioRoot
}

func fioCommand(root string, args ...string) *exec.Cmd {
	lib := filepath.Join(root, "lib")
	return exec.Command(filepath.Join(lib, "ld-linux-x86-64.so.2"), append([]string{"--library-path", lib, filepath.Join(root, "bin", "fio")}, args...)...)
}

// fioJob is one job of runFio: random writes of bs over size octets (at
// offset on a device), then every block read back and checked.
type fioJob struct {
	name             string
	bs, size, offset int64
}

// runFio runs jobs at once with libaio and O_DIRECT at queue depth 16,
// on the device dev, or each on a file of its own in dir: each writes
// its blocks with a CRC32c header (verify=crc32c) and then reads all back
// and checks them (do_verify), stopping at the first bad one
// (verify_fatal). fio must exit 0, and every job must report no error and
// have read back all it wrote.
func runFio(t *testing.T, root, dev, dir string, jobs []fioJob) {
	t.Helper()
	var job strings.Builder
	job.WriteString("[global]\nioengine=libaio\ndirect=1\niodepth=16\nrw=randwrite\nverify=crc32c\ndo_verify=1\nverify_fatal=1\nverify_state_save=0\nthread=1\n")
	where := dev
	if dev != "" {
		fmt.Fprintf(&job, "filename=%s\n", dev)
	} else {
		fmt.Fprintf(&job, "directory=%s\n", dir)
		where = "files in " + dir
	}
	for _, j := range jobs {
		fmt.Fprintf(&job, "[%s]\nbs=%d\nsize=%d\n", j.name, j.bs, j.size)
		if dev != "" {
			fmt.Fprintf(&job, "offset=%d\n", j.offset)
		} else {
			fmt.Fprintf(&job, "filename=%s.fio\n", j.name)
		}
	}
	jobFile := filepath.Join(t.TempDir(), "verify.fio")
	if err := os.WriteFile(jobFile, []byte(job.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := fioCommand(root, "--output-format=json", jobFile)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	var res struct {
		Jobs []struct {
			Name  string `json:"jobname"`
			Error int    `json:"error"`
			Read  struct {
				Bytes int64   `json:"io_bytes"`
				BW    int64   `json:"bw_bytes"`
				IOPS  float64 `json:"iops"`
			} `json:"read"`
			Write struct {
				Bytes int64   `json:"io_bytes"`
				BW    int64   `json:"bw_bytes"`
				IOPS  float64 `json:"iops"`
			} `json:"write"`
		} `json:"jobs"`
	}
	js := stdout.Bytes()
	if i := bytes.IndexByte(js, '{'); i > 0 {
		js = js[i:]
	}
	if jerr := json.Unmarshal(js, &res); jerr != nil || err != nil {
		t.Fatalf("fio on %s: %v (json: %v) after %.1f s\njob:\n%s\nstderr:\n%s\nstdout:\n%s", where, err, jerr, elapsed.Seconds(), job.String(), stderr.String(), stdout.String())
	}
	if len(res.Jobs) != len(jobs) {
		t.Fatalf("fio on %s reported %d jobs, want %d\n%s", where, len(res.Jobs), len(jobs), stdout.String())
	}
	var sum strings.Builder
	for i, j := range res.Jobs {
		want := jobs[i].size
		fmt.Fprintf(&sum, "\n  %-4s error %d, wrote %d MiB at %.1f MiB/s (%.0f IOPS), verified %d MiB at %.1f MiB/s",
			j.Name, j.Error, j.Write.Bytes>>20, float64(j.Write.BW)/(1<<20), j.Write.IOPS, j.Read.Bytes>>20, float64(j.Read.BW)/(1<<20))
		if j.Error != 0 {
			t.Errorf("fio job %s on %s: error %d", j.Name, where, j.Error)
		}
		if j.Write.Bytes != want || j.Read.Bytes != want {
			t.Errorf("fio job %s on %s wrote %d and verified %d octets, want %d each", j.Name, where, j.Write.Bytes, j.Read.Bytes, want)
		}
	}
	t.Logf("fio verify=crc32c, libaio, direct, iodepth 16 on %s: exit 0 in %.1f s, 0 verify errors%s", where, elapsed.Seconds(), sum.String())
	if stderr.Len() > 0 {
		t.Logf("fio's stderr:\n%s", stderr.String())
	}
}
