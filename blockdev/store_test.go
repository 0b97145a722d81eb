package blockdev

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocated returns the octets the file system has allocated to path
// (st_blocks, in 512-octet units).
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>9)
		if b[i] == 0 {
			b[i] = 1
		}
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFile(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name     string
		setup    func(t *testing.T, path string) // nil: path does not exist
		size     int64
		readOnly bool
		wantSize int64
		wantErr  []string // substrings of the error; nil: success
	}{
		{name: "missing is created sparse", size: mib, wantSize: mib},
		{name: "missing without size", size: 0, wantErr: []string{"does not exist", "no size"}},
		{name: "missing read-only", size: mib, readOnly: true, wantErr: []string{"does not exist", "read-only"}},
		{name: "size not a multiple of 512", size: mib + 100, wantErr: []string{"1048676", "multiple of 512"}},
		{name: "negative size", size: -512, wantErr: []string{"-512"}},
		{name: "existing, size 0 takes its size", setup: func(t *testing.T, p string) { writeFile(t, p, make([]byte, 3*512)) }, wantSize: 3 * 512},
		{name: "existing, same size", setup: func(t *testing.T, p string) { writeFile(t, p, make([]byte, 4096)) }, size: 4096, wantSize: 4096},
		{name: "existing, read-only", setup: func(t *testing.T, p string) { writeFile(t, p, make([]byte, 4096)) }, readOnly: true, wantSize: 4096},
		{name: "existing, other size", setup: func(t *testing.T, p string) { writeFile(t, p, make([]byte, mib)) }, size: 2 * mib, wantErr: []string{"1048576", "2097152", "never truncates"}},
		{name: "existing, empty", setup: func(t *testing.T, p string) { writeFile(t, p, nil) }, wantErr: []string{"empty"}},
		{name: "existing, not a multiple of 512", setup: func(t *testing.T, p string) { writeFile(t, p, make([]byte, 1000)) }, wantErr: []string{"1000 octets", "multiple of 512"}},
		{name: "directory", setup: func(t *testing.T, p string) { os.Mkdir(p, 0o700) }, size: mib, wantErr: []string{"open", "is a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "disk.img")
			if c.setup != nil {
				c.setup(t, path)
			}
			f, err := OpenFile(path, c.size, c.readOnly)
			if c.wantErr != nil {
				if err == nil {
					f.Close()
					t.Fatal("no error")
				}
				for _, w := range append(c.wantErr, path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if c.setup == nil {
					if _, err := os.Stat(path); !os.IsNotExist(err) {
						t.Errorf("a failed open left %s behind", path)
					}
				} else if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && c.size != 0 && fi.Size() == c.size {
					t.Errorf("a failed open resized %s", path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Size() != c.wantSize || f.Mapping().Len() != int(c.wantSize) || f.ReadOnly() != c.readOnly || f.Mapping().Writable() == c.readOnly {
				t.Fatalf("size %d, mapping %d, read-only %v, writable %v", f.Size(), f.Mapping().Len(), f.ReadOnly(), f.Mapping().Writable())
			}
			if f.Thin() == c.readOnly {
				t.Errorf("Thin() = %v for a read-only %v store on a file system that punches holes", f.Thin(), c.readOnly)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != c.wantSize {
				t.Fatalf("file size %v (%v), want %d", fi.Size(), err, c.wantSize)
			}
			if c.setup == nil {
				if a := allocated(t, path); a > 64<<10 {
					t.Errorf("created file has %d octets allocated, want a sparse file", a)
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Errorf("created with mode %v, want 0600", fi.Mode().Perm())
				}
			}
		})
	}
}

// TestFileSurvivesReopen: data written through the mapping and synced is
// in the file, and in the store opened again.
func TestFileSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := OpenFile(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3*4096+512, 3)
	copy(f.Mapping().Bytes()[8192+512:], data)
	if err := f.Sync(8192+512, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Sync(0, 512); err == nil {
		t.Error("Sync after Close succeeded")
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk[8192+512:8192+512+len(data)], data) {
		t.Fatal("the file does not hold what was written")
	}
	for _, ro := range []bool{false, true} {
		g, err := OpenFile(path, 0, ro)
		if err != nil {
			t.Fatal(err)
		}
		got := g.Mapping().Bytes()
		if g.Size() != 1<<20 || !bytes.Equal(got[8192+512:8192+512+len(data)], data) || !allZero(got[:8192+512]) {
			t.Errorf("reopened (read-only %v): size %d, data intact %v", ro, g.Size(), bytes.Equal(got[8192+512:8192+512+len(data)], data))
		}
		g.Close()
	}
}

// TestFileSync: Sync accepts every range inside the store and names the
// path when it fails.
func TestFileSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := OpenFile(path, 64<<10, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	copy(f.Mapping().Bytes(), pattern(64<<10, 9))
	cases := []struct {
		off, n int64
		ok     bool
	}{
		{0, 64 << 10, true},
		{512, 512, true},
		{4096 + 100, 5000, true},
		{64 << 10, 0, true},
		{0, 0, true},
		{-1, 512, false},
		{60 << 10, 8 << 10, false},
		{0, -512, false},
	}
	for _, c := range cases {
		err := f.Sync(c.off, c.n)
		if (err == nil) != c.ok {
			t.Errorf("Sync(%d, %d) = %v, want ok %v", c.off, c.n, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("Sync(%d, %d) error %q does not name %s", c.off, c.n, err, path)
		}
	}
}

// TestDiscardFrees: Discard punches holes (st_blocks shrinks), the range
// reads zeros, the octets around it are intact.
func TestDiscardFrees(t *testing.T) {
	const size = 4 << 20
	cases := []struct {
		name      string
		off, n    int64
		minFreed  int64 // octets st_blocks must shrink by at least
		maxFreed  int64
		zeroStart int64 // the octets that must read zero: exactly [off, off+n)
	}{
		{name: "aligned", off: 1 << 20, n: 2 << 20, minFreed: 2 << 20, maxFreed: 2 << 20},
		{name: "unaligned edges", off: 1<<20 + 1000, n: 2<<20 - 3000, minFreed: 2<<20 - 2*4096, maxFreed: 2 << 20},
		{name: "inside one page", off: 4096 + 512, n: 1024, minFreed: 0, maxFreed: 0},
		{name: "whole store", off: 0, n: size, minFreed: size, maxFreed: size},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "disk.img")
			f, err := OpenFile(path, size, false)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !f.Thin() {
				t.Skipf("the file system of %s does not punch holes", path)
			}
			data := pattern(size, 1)
			copy(f.Mapping().Bytes(), data)
			if err := f.Sync(0, size); err != nil {
				t.Fatal(err)
			}
			before := allocated(t, path)
			if before < size {
				t.Fatalf("%d octets allocated after writing %d", before, size)
			}
			if err := f.Discard(c.off, c.n); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(0, size); err != nil {
				t.Fatal(err)
			}
			freed := before - allocated(t, path)
			if freed < c.minFreed || freed > c.maxFreed {
				t.Errorf("st_blocks shrank by %d octets, want [%d, %d]", freed, c.minFreed, c.maxFreed)
			}
			m := f.Mapping().Bytes()
			if !allZero(m[c.off : c.off+c.n]) {
				t.Error("discarded range does not read zeros")
			}
			if !bytes.Equal(m[:c.off], data[:c.off]) || !bytes.Equal(m[c.off+c.n:], data[c.off+c.n:]) {
				t.Error("octets outside the discarded range changed")
			}
			onDisk, _ := os.ReadFile(path)
			if !bytes.Equal(onDisk, m) {
				t.Error("the file and the mapping disagree")
			}
		})
	}
}

// TestReadOnly: a read-only store refuses to discard, reports itself not
// thin, and its mapping faults on a store.
func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	writeFile(t, path, pattern(8192, 5))
	f, err := OpenFile(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.ReadOnly() || f.Thin() || f.Mapping().Writable() {
		t.Fatalf("ReadOnly %v Thin %v Writable %v", f.ReadOnly(), f.Thin(), f.Mapping().Writable())
	}
	if err := f.Discard(0, 512); err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), path) {
		t.Errorf("Discard on a read-only store: %v", err)
	}
	if err := f.Sync(0, 8192); err != nil {
		t.Errorf("Sync on a read-only store: %v", err)
	}
	faulted := func() (faulted bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { faulted = recover() != nil }()
		f.Mapping().Bytes()[100] = 1
		return false
	}()
	if !faulted {
		t.Fatal("a store into the read-only mapping did not fault")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, pattern(8192, 5)) {
		t.Fatal("the read-only file changed")
	}
}

func TestMemory(t *testing.T) {
	const size = 1 << 20
	s, err := NewMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Thin() || s.ReadOnly() || s.Size() != size {
		t.Fatalf("Thin %v ReadOnly %v Size %d", s.Thin(), s.ReadOnly(), s.Size())
	}
	m := s.Mapping().Bytes()
	data := pattern(size, 2)
	copy(m, data)
	resident := func(off, n int64) int {
		vec := make([]byte, (n+pageSize-1)/pageSize)
		b := m[off : off+n]
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		r := 0
		for _, v := range vec {
			r += int(v & 1)
		}
		return r
	}
	if r := resident(64<<10, 64<<10); r != 16 {
		t.Fatalf("%d of 16 written pages resident", r)
	}
	if err := s.Discard(64<<10+100, 64<<10); err != nil {
		t.Fatal(err)
	}
	if r := resident(68<<10, 60<<10); r != 0 {
		t.Errorf("%d of the 15 whole discarded pages still resident", r)
	}
	if !allZero(m[64<<10+100:128<<10+100]) || !bytes.Equal(m[:64<<10+100], data[:64<<10+100]) || !bytes.Equal(m[128<<10+100:], data[128<<10+100:]) {
		t.Error("Discard changed the wrong octets")
	}
	for _, r := range [][2]int64{{-512, 512}, {size, 512}, {0, size + 512}} {
		if err := s.Discard(r[0], r[1]); err == nil {
			t.Errorf("Discard(%d, %d) succeeded", r[0], r[1])
		}
		if err := s.Sync(r[0], r[1]); err == nil {
			t.Errorf("Sync(%d, %d) succeeded", r[0], r[1])
		}
	}
}

// TestOpen: Open picks the store by the path's file type.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.img")
	writeFile(t, existing, make([]byte, 8192))
	cases := []struct {
		name    string
		path    string
		size    int64
		wantErr string
	}{
		{"missing file is created", filepath.Join(dir, "new.img"), 8192, ""},
		{"existing file", existing, 0, ""},
		{"existing file of another size", existing, 4096, "4096"},
		{"directory", dir, 8192, "neither a regular file nor a block device"},
		{"character device", "/dev/null", 8192, "neither a regular file nor a block device"},
		{"unreadable parent", filepath.Join(existing, "x"), 8192, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.path, c.size, false)
			if c.wantErr != "" {
				if err == nil {
					s.Close()
					t.Fatal("no error")
				}
				if !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), c.path) {
					t.Fatalf("error %q does not say %q and name %s", err, c.wantErr, c.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, ok := s.(*File); !ok {
				t.Fatalf("Open returned a %T", s)
			}
		})
	}
}

// loopDevice attaches a loop device to a new sparse file of size octets and
// returns both paths; the test is skipped where that cannot be done.
func loopDevice(t *testing.T, size int64) (dev, backing string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("block device tests need root to attach a loop device")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("block device tests need loop devices: %v", err)
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skipf("block device tests need losetup: %v", err)
	}
	backing = filepath.Join(t.TempDir(), "backing.img")
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(backing, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("losetup --find --show %s: %v: %s", backing, err, out)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return dev, backing
}

func TestDevice(t *testing.T) {
	const size = 8 << 20
	dev, backing := loopDevice(t, size)

	d, err := OpenDevice(dev, false)
	if err != nil {
		t.Fatal(err)
	}
	if d.Size() != size || d.ReadOnly() || !d.Mapping().Writable() {
		t.Fatalf("Size %d ReadOnly %v Writable %v", d.Size(), d.ReadOnly(), d.Mapping().Writable())
	}
	if _, err := OpenDevice(dev, false); err == nil || !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), dev) {
		t.Errorf("second writable open of %s: %v, want EBUSY naming it", dev, err)
	}

	data := pattern(size, 4)
	copy(d.Mapping().Bytes(), data)
	if err := d.Sync(0, size); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backing); !bytes.Equal(b, data) {
		t.Fatal("synced data did not reach the loop device's backing file")
	}
	before := allocated(t, backing)
	if err := d.Discard(1<<20+512, 4<<20); err != nil {
		t.Fatal(err)
	}
	m := d.Mapping().Bytes()
	if !allZero(m[1<<20+512:5<<20+512]) || !bytes.Equal(m[:1<<20+512], data[:1<<20+512]) || !bytes.Equal(m[5<<20+512:], data[5<<20+512:]) {
		t.Fatal("Discard changed the wrong octets")
	}
	if err := d.Sync(0, size); err != nil {
		t.Fatal(err)
	}
	if d.Thin() {
		if freed := before - allocated(t, backing); freed < 4<<20-4096 {
			t.Errorf("discarding 4 MiB freed %d octets of the backing file", freed)
		}
	} else {
		t.Logf("%s does not report discard and write-zeroes support: Thin is false", dev)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// Through Open, read-only, the data is there; a wrong size is an error.
	if _, err := Open(dev, size/2, false); err == nil || !strings.Contains(err.Error(), "4194304") {
		t.Errorf("Open with the wrong size: %v", err)
	}
	s, err := Open(dev, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*Device); !ok || !s.ReadOnly() || s.Thin() || s.Mapping().Writable() {
		t.Fatalf("Open(%s, read-only): %T read-only %v thin %v", dev, s, s.ReadOnly(), s.Thin())
	}
	if got := s.Mapping().Bytes(); !bytes.Equal(got[:1<<20+512], data[:1<<20+512]) || !allZero(got[1<<20+512:5<<20+512]) {
		t.Fatal("reopened device does not hold the data")
	}
	if err := s.Discard(0, 4096); err == nil {
		t.Error("Discard on a read-only device succeeded")
	}
}

// TestWriteAt: what WriteAt writes is in the mapping when it returns and
// in the file after Sync; it refuses ranges outside the store, a read-only
// store, and a file cut under the store (which pwrite would otherwise grow
// back); the memory store takes the same calls.
func TestWriteAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := OpenFile(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data := pattern(3*4096+512, 11)
	for _, s := range []Store{f, m} {
		if err := s.WriteAt(data, 8192+512); err != nil {
			t.Fatalf("%T: WriteAt: %v", s, err)
		}
		got := s.Mapping().Bytes()
		if !bytes.Equal(got[8192+512:8192+512+len(data)], data) || !allZero(got[:8192+512]) || !allZero(got[8192+512+len(data):]) {
			t.Errorf("%T: the mapping does not show exactly what WriteAt wrote", s)
		}
		for _, r := range [][2]int64{{-512, 512}, {1<<20 - 512, 1024}, {1 << 20, 1}} {
			if err := s.WriteAt(make([]byte, r[1]), r[0]); err == nil {
				t.Errorf("%T: WriteAt(%d octets at %d) outside the store succeeded", s, r[1], r[0])
			}
		}
	}
	if err := f.Sync(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b[8192+512:8192+512+len(data)], data) {
		t.Fatal("the file does not hold what WriteAt wrote")
	}
	if err := os.Truncate(path, 512<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt(data, 600<<10); err == nil || !strings.Contains(err.Error(), "cut to 524288") {
		t.Errorf("WriteAt past a cut: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != 512<<10 {
		t.Errorf("WriteAt past a cut grew the file to %d octets", st.Size())
	}
	if err := f.WriteAt(data, 4096); err != nil {
		t.Errorf("WriteAt before the cut: %v", err)
	}
	ro, err := OpenFile(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.WriteAt(data, 0); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("WriteAt on a read-only store: %v", err)
	}
}

// TestWriteAtTmpfs: on tmpfs small writes are stored through the mapping
// and large ones with pwrite; both are what the mapping and the file show.
func TestWriteAtTmpfs(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("skipped: /dev/shm is not a tmpfs here")
	}
	dir, err := os.MkdirTemp("/dev/shm", "blockdev-test")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "disk.img")
	f, err := OpenFile(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.s.copyMax == 0 {
		t.Fatal("a file on tmpfs is not written through its mapping")
	}
	small, large := pattern(f.s.copyMax, 21), pattern(f.s.copyMax+512, 22)
	if err := f.WriteAt(small, 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt(large, 64<<10); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	m := f.Mapping().Bytes()
	for _, w := range []struct {
		off  int
		data []byte
	}{{4096, small}, {64 << 10, large}} {
		if !bytes.Equal(b[w.off:w.off+len(w.data)], w.data) || !bytes.Equal(m[w.off:w.off+len(w.data)], w.data) {
			t.Errorf("the %d octets written at %d are not in the file and the mapping", len(w.data), w.off)
		}
	}
}

// TestReadAt: every store reads back what was written, refuses a range
// outside it, and a file cut under the store is an error, not SIGBUS.
func TestReadAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := OpenFile(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data := pattern(5*4096+512, 13)
	for _, s := range []Store{f, m} {
		if err := s.WriteAt(data, 4096+512); err != nil {
			t.Fatalf("%T: WriteAt: %v", s, err)
		}
		got := make([]byte, len(data)+1024)
		if err := s.ReadAt(got, 4096); err != nil {
			t.Fatalf("%T: ReadAt: %v", s, err)
		}
		if !allZero(got[:512]) || !bytes.Equal(got[512:512+len(data)], data) || !allZero(got[512+len(data):]) {
			t.Errorf("%T: ReadAt does not return what WriteAt wrote", s)
		}
		for _, r := range [][2]int64{{-512, 512}, {1<<20 - 512, 1024}, {1 << 20, 1}} {
			if err := s.ReadAt(make([]byte, r[1]), r[0]); err == nil {
				t.Errorf("%T: ReadAt(%d octets at %d) outside the store succeeded", s, r[1], r[0])
			}
		}
	}
	if err := os.Truncate(path, 512<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.ReadAt(make([]byte, 4096), 600<<10); err == nil || !strings.Contains(err.Error(), "cut under the store") {
		t.Errorf("ReadAt past a cut: %v", err)
	}
}
