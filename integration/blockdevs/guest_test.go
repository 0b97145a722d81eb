package blockdevs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"golang.org/x/sys/unix"
)

const lunSize = 64 << 20

func inGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("VMLAB_GUEST") != "1" {
		t.Skip("runs inside the vmlab guest (nbd.ko, ublk_drv.ko); TestNBD and TestUblk boot it")
	}
}

// lab is a target in the test process with one memory LUN, whose octets
// the test reads directly to check what reached it.
type lab struct {
	tt    *testtarget.Target
	store []byte
}

func newLab(t *testing.T) *lab {
	st := testtarget.Memory(t, lunSize)
	return &lab{tt: testtarget.Start(t, st), store: st.Mapping().Bytes()}
}

// disk logs a session in and opens LUN 0 as a remote disk.
func (l *lab) disk(t *testing.T, depth int) (*initiator.Session, *remote.Disk) {
	s := l.tt.Dial(t, initiator.Config{Buffers: depth*(1<<20+8192) + 1<<20, QueueDepth: depth})
	slots, err := remote.NewSlots(s, depth, 1<<20+8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slots.Close)
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// alignedBuf is page-aligned memory for O_DIRECT.
func alignedBuf(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// rawVerify writes patterns through dev with O_DIRECT at offsets and
// sizes that cross the remote disk's slots, checks that each reached the
// target's store, and reads each back through dev.
func rawVerify(t *testing.T, dev string, store []byte, seed uint64) {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	rng := rand.New(rand.NewPCG(seed, 7))
	buf := alignedBuf(t, 4<<20)
	for _, tc := range []struct{ off, n int }{
		{0, 4096}, {1 << 20, 64 << 10}, {5<<20 + 4096, 1 << 20}, {9 << 20, 3<<20 + 8192}, {lunSize - 8192, 8192},
	} {
		p := buf[:tc.n]
		for i := 0; i < len(p); i += 8 {
			*(*uint64)(unsafe.Pointer(&p[i])) = rng.Uint64()
		}
		if n, err := unix.Pwrite(fd, p, int64(tc.off)); err != nil || n != tc.n {
			t.Fatalf("pwrite of %d at %d: %d, %v", tc.n, tc.off, n, err)
		}
		if !bytes.Equal(store[tc.off:tc.off+tc.n], p) {
			t.Fatalf("the write of %d at %d through %s did not reach the target's store", tc.n, tc.off, dev)
		}
		want := bytes.Clone(p)
		clear(p)
		if n, err := unix.Pread(fd, p, int64(tc.off)); err != nil || n != tc.n {
			t.Fatalf("pread of %d at %d: %d, %v", tc.n, tc.off, n, err)
		}
		if !bytes.Equal(p, want) {
			t.Fatalf("reading back %d at %d through %s: not what was written", tc.n, tc.off, dev)
		}
	}
	if err := unix.Fsync(fd); err != nil {
		t.Fatalf("fsync %s: %v", dev, err)
	}
}

// blkZeroOut is BLKZEROOUT, _IO(0x12, 127): the kernel sends WRITE_ZEROES
// (with NOUNMAP) where the device takes it, else writes zero pages.
const blkZeroOut = 0x127f

// discard discards [off, off+n) of dev (BLKDISCARD) and checks that the
// target's store reads zero there and is untouched around it.
func discard(t *testing.T, dev string, store []byte, off, n int) {
	t.Helper()
	zeroRange(t, dev, store, off, n, unix.BLKDISCARD, "BLKDISCARD")
}

// zeroOut does the same with BLKZEROOUT.
func zeroOut(t *testing.T, dev string, store []byte, off, n int) {
	t.Helper()
	zeroRange(t, dev, store, off, n, blkZeroOut, "BLKZEROOUT")
}

func zeroRange(t *testing.T, dev string, store []byte, off, n int, ioctl uintptr, name string) {
	t.Helper()
	for i := off - 4096; i < off+n+4096; i++ {
		store[i] = 0xa5
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r := [2]uint64{uint64(off), uint64(n)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctl, uintptr(unsafe.Pointer(&r))); e != 0 {
		t.Fatalf("%s [%d, +%d) on %s: %v", name, off, n, dev, e)
	}
	if !bytes.Equal(store[off:off+n], make([]byte, n)) {
		t.Fatalf("%s on %s left data in the target's store", name, dev)
	}
	if !bytes.Equal(store[off-4096:off], bytes.Repeat([]byte{0xa5}, 4096)) || !bytes.Equal(store[off+n:off+n+4096], bytes.Repeat([]byte{0xa5}, 4096)) {
		t.Fatalf("%s on %s changed data around its range", name, dev)
	}
}

// sysBlock reads an attribute of dev under /sys/block.
func sysBlock(t *testing.T, dev, attr string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkGeometry checks the device's size and logical block size against
// the LUN's.
func checkGeometry(t *testing.T, dev string, size int64, bs int) {
	t.Helper()
	if got := sysBlock(t, dev, "size"); got != fmt.Sprint(size/512) {
		t.Errorf("%s has %s sectors, want %d", dev, got, size/512)
	}
	if got := sysBlock(t, dev, "queue/logical_block_size"); got != fmt.Sprint(bs) {
		t.Errorf("%s has %s-octet logical blocks, want %d", dev, got, bs)
	}
	// A volatile cache, so that fsync reaches the target as FLUSH
	// (SYNCHRONIZE CACHE); discard, so that BLKDISCARD reaches it as
	// UNMAP.
	if got := sysBlock(t, dev, "queue/write_cache"); got != "write back" {
		t.Errorf("%s's write cache is %q, want \"write back\"", dev, got)
	}
	if got := sysBlock(t, dev, "queue/discard_max_bytes"); got == "0" {
		t.Errorf("%s takes no discard", dev)
	}
	t.Logf("%s: write_zeroes_max_bytes %s, max_sectors_kb %s, nr_requests %s", dev,
		sysBlock(t, dev, "queue/write_zeroes_max_bytes"), sysBlock(t, dev, "queue/max_sectors_kb"), sysBlock(t, dev, "queue/nr_requests"))
}

// ext4 is mke2fs and the ext4 module, when the host could provide them.
type ext4 struct{ root string }

// haveExt4 loads ext4 and returns how to make it, or nil when the host
// copied nothing in.
func haveExt4(t *testing.T) *ext4 {
	root, _ := filepath.Abs(e2fsDir)
	if _, err := os.Stat(filepath.Join(root, "bin", "mke2fs")); err != nil {
		t.Log("no mke2fs from the host: the raw device checks stand alone")
		return nil
	}
	order, err := os.ReadFile(filepath.Join(modulesDir, modulesList))
	if err != nil {
		t.Logf("no ext4 module from the host (%v): the raw device checks stand alone", err)
		return nil
	}
	exec.Command("modprobe", "crc32c_generic").Run()
	for _, ko := range strings.Fields(string(order)) {
		name := strings.ReplaceAll(strings.TrimSuffix(ko, ".ko"), "-", "_")
		if _, err := os.Stat(filepath.Join("/sys/module", name)); err == nil {
			continue
		}
		if out, err := exec.Command("insmod", filepath.Join(modulesDir, ko)).CombinedOutput(); err != nil {
			t.Fatalf("insmod %s: %v: %s", ko, err, out)
		}
	}
	return &ext4{root: root}
}

// mkfs makes ext4 on dev, of size (mke2fs's fs-size: "64M") when given,
// else filling it.
func (e *ext4) mkfs(t *testing.T, dev string, size ...string) {
	t.Helper()
	cmd := e.command("mke2fs", append([]string{"-t", "ext4", "-F", "-q", dev}, size...)...)
	cmd.Env = append(os.Environ(), "MKE2FS_CONFIG="+filepath.Join(e.root, "mke2fs.conf"))
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", dev, err, out)
	}
	t.Logf("mkfs.ext4 %s: %.1f s", dev, time.Since(start).Seconds())
}

// command runs a program the host copied into e2fs/bin with the
// libraries beside it.
func (e *ext4) command(name string, args ...string) *exec.Cmd {
	lib := filepath.Join(e.root, "lib")
	return exec.Command(filepath.Join(lib, "ld-linux-x86-64.so.2"), append([]string{"--library-path", lib,
		filepath.Join(e.root, "bin", name)}, args...)...)
}

// fsck runs e2fsck -fn on img (a device or the image file a target
// serves) and fails unless it finds the file system clean (exit 0).
func (e *ext4) fsck(t *testing.T, img string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(e.root, "bin", "e2fsck")); err != nil {
		t.Errorf("no e2fsck from the host: %s is not checked", img)
		return
	}
	start := time.Now()
	out, err := e.command("e2fsck", "-f", "-n", img).CombinedOutput()
	if err != nil {
		t.Errorf("e2fsck -fn %s: %v (exit 0 is clean; 4 has errors left uncorrected)\n%s", img, err, out)
		return
	}
	t.Logf("e2fsck -fn %s: clean in %.1f s\n%s", img, time.Since(start).Seconds(), out)
}

func mountExt4(t *testing.T, dev, dir string) {
	t.Helper()
	if err := unix.Mount(dev, dir, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s on %s: %v", dev, dir, err)
	}
}

func umount(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatalf("umount %s: %v", dir, err)
	}
}

// fileData is the content of the test's file: pseudo-random from seed.
func fileData(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	p := make([]byte, n)
	for i := 0; i < n; i += 8 {
		*(*uint64)(unsafe.Pointer(&p[i])) = rng.Uint64()
	}
	return p
}

// writeFile writes a file and syncs it.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkFile reads a file back after the page cache was dropped.
func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s read back differs from what was written (%d octets, want %d)", path, len(got), len(want))
	}
}

func dropCaches() { os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o644) }

// ddpinitiator runs the command the host built and returns its output
// and exit status.
func ddpinitiator(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin, _ := filepath.Abs(initiatorBin)
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("ddpinitiator %v: %v", args, err)
	}
	t.Logf("ddpinitiator %s: exit %d in %.2f s\n%s%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), time.Since(start).Seconds(), o.String(), e.String())
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// commandRoundTrip is what both drivers go through with the command:
// attach, the raw checks, a filesystem (when there is ext4) written,
// refused detach while mounted, unmounted and read back after the cache
// is dropped, then detach and the process's logout.
func commandRoundTrip(t *testing.T, kind string, l *lab) {
	runDir := t.TempDir()
	common := []string{"--run-dir", runDir}
	out, _, code := ddpinitiator(t, append([]string{"attach", "--" + kind, "--target", testtarget.TargetName, "--queue-depth", "16"}, append(common, l.tt.Addr)...)...)
	if code != 0 {
		t.Fatalf("attach --%s failed", kind)
	}
	dev := strings.TrimSpace(out)
	if !strings.HasPrefix(dev, "/dev/") || strings.Contains(dev, "\n") {
		t.Fatalf("attach --%s printed %q, want one device", kind, out)
	}
	st, err := os.ReadFile(filepath.Join(runDir, "blockdevs", filepath.Base(dev)+".json"))
	if err != nil {
		t.Fatalf("no state file for %s: %v", dev, err)
	}
	t.Logf("state of %s: %s", dev, st)
	defer func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
			for _, p := range logs {
				b, _ := os.ReadFile(p)
				t.Logf("%s:\n%s", p, b)
			}
		}
	}()
	checkGeometry(t, dev, lunSize, blockdev.BlockSize)
	rawVerify(t, dev, l.store, 21)
	discard(t, dev, l.store, 16<<20, 2<<20)
	zeroOut(t, dev, l.store, 20<<20, 1<<20)
	if out, _, code := ddpinitiator(t, append([]string{"status"}, common...)...); code != 0 || !strings.Contains(out, dev) {
		t.Errorf("status: exit %d, does not list %s", code, dev)
	}
	var pid int
	fmt.Sscanf(string(st[bytes.Index(st, []byte(`"pid":`))+6:]), "%d", &pid)
	if e := haveExt4(t); e != nil {
		e.mkfs(t, dev)
		mnt := t.TempDir()
		mountExt4(t, dev, mnt)
		data := fileData(5, 8<<20)
		writeFile(t, filepath.Join(mnt, "pattern"), data)
		_, stderr, code := ddpinitiator(t, append([]string{"detach"}, append(common, dev)...)...)
		if code == 0 || !strings.Contains(stderr, "in use") {
			umount(t, mnt)
			t.Fatalf("detach of mounted %s: exit %d, %q; want a refusal", dev, code, stderr)
		}
		umount(t, mnt)
		dropCaches()
		mountExt4(t, dev, mnt)
		checkFile(t, filepath.Join(mnt, "pattern"), data)
		umount(t, mnt)
		pid = recoverMounted(t, kind, dev, runDir, pid)
	}
	out, _, code = ddpinitiator(t, append([]string{"detach"}, append(common, dev)...)...)
	if code != 0 || !strings.Contains(out, "detached "+dev) || !strings.Contains(out, "logged out") {
		t.Fatalf("detach %s: exit %d, %q", dev, code, out)
	}
	if alive(pid) {
		t.Errorf("the process that served %s (pid %d) is still there after detach", dev, pid)
	}
	if _, err := os.Stat(filepath.Join(runDir, "blockdevs", filepath.Base(dev)+".json")); err == nil {
		t.Errorf("the state file of %s is still there after detach", dev)
	}
	if out, _, _ := ddpinitiator(t, append([]string{"status"}, common...)...); strings.Contains(out, dev) {
		t.Errorf("status lists %s after detach", dev)
	}
}

// recoverMounted kills the process serving dev, which a mounted ext4
// is on, with SIGKILL; writes to the filesystem then, whose fsync waits
// while the kernel holds the device's I/O; has "ddpinitiator attach
// --recover" serve the device again; and checks that the fsync succeeds
// and that everything written before and after reads back from a fresh
// mount. It returns the new process's pid.
func recoverMounted(t *testing.T, kind, dev, runDir string, pid int) int {
	t.Helper()
	mnt := t.TempDir()
	mountExt4(t, dev, mnt)
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	}()
	before, during := fileData(6, 2<<20), fileData(7, 2<<20)
	writeFile(t, filepath.Join(mnt, "before"), before)
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs 10 s after SIGKILL", pid)
		}
	}
	killed := time.Now()
	written := make(chan error, 1)
	go func() {
		f, err := os.Create(filepath.Join(mnt, "during"))
		if err == nil {
			_, err = f.Write(during)
		}
		if err == nil {
			err = f.Sync()
		}
		if f != nil {
			f.Close()
		}
		written <- err
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-written:
		t.Logf("the write and fsync after the kill returned before the recovery: %v", err)
		written <- err
	default:
		t.Logf("the write's fsync waits for the device, as it should")
	}
	out, _, code := ddpinitiator(t, "attach", "--recover", dev, "--run-dir", runDir)
	if code != 0 || strings.TrimSpace(out) != dev {
		t.Fatalf("attach --recover %s: exit %d, %q", dev, code, out)
	}
	select {
	case err := <-written:
		if err != nil {
			t.Fatalf("writing to the filesystem across the recovery: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the write's fsync has not returned 60 s after the recovery")
	}
	t.Logf("%s: served again %.1f s after the kill; the filesystem's fsync went through", dev, time.Since(killed).Seconds())
	logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		t.Logf("%s:\n%s", filepath.Base(p), b)
	}
	umount(t, mnt)
	dropCaches()
	mountExt4(t, dev, mnt)
	checkFile(t, filepath.Join(mnt, "before"), before)
	checkFile(t, filepath.Join(mnt, "during"), during)
	umount(t, mnt)
	mounted = false
	st, err := readState(runDir, dev)
	if err != nil {
		t.Fatal(err)
	}
	if st.PID == pid {
		t.Fatalf("the state of %s still names the killed process", dev)
	}
	return st.PID
}

// alive says whether process pid runs (an unreaped zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

type devState struct {
	PID int `json:"pid"`
}

func readState(runDir, dev string) (devState, error) {
	var st devState
	b, err := os.ReadFile(filepath.Join(runDir, "blockdevs", filepath.Base(dev)+".json"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}
