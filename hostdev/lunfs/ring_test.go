package lunfs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ddpstore/ddpstore/hostdev/lunfs"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"golang.org/x/sys/unix"
)

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// setURing sets the kernel's FUSE-over-io_uring switch for the test and
// puts it back after; it skips where the kernel has none.
func setURing(t *testing.T, on bool) {
	t.Helper()
	needFUSE(t)
	old, err := os.ReadFile(enableURing)
	if err != nil {
		t.Skipf("this kernel has no FUSE over io_uring: %v", err)
	}
	v := "N"
	if on {
		v = "Y"
	}
	if err := os.WriteFile(enableURing, []byte(v), 0); err != nil {
		t.Fatalf("switching FUSE over io_uring: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(enableURing, []byte(strings.TrimSpace(string(old))), 0); err != nil {
			t.Errorf("restoring %s: %v", enableURing, err)
		}
	})
}

// TestRingReadWrite: with the ring on, requests arrive over it (its
// counter grows by at least one per read and write), and what is written
// at any offset and size, up to 2 MiB (two requests), reaches the LUN and
// reads back, fsync included.
func TestRingReadWrite(t *testing.T) {
	setURing(t, true)
	st := testtarget.Memory(t, 16<<20)
	dir, srv := mountServer(t, lunfs.Options{DirectIO: true, IOURing: lunfs.IOURingOn}, st)
	if !srv.IOURing() {
		t.Fatal("mounted with io_uring on, but requests come through /dev/fuse")
	}
	// The mount polled a file once, so that the kernel knows not to ask
	// again: os.OpenFile's epoll registration sends no POLL, which would
	// block this process's runtime until answered.
	if n := srv.RingPolls(); n != 1 {
		t.Fatalf("%d POLLs at mount, want 1", n)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lun0"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := srv.RingPolls(); n != 1 {
		t.Fatalf("opening a file sent %d POLLs", n-1)
	}
	r := rand.New(rand.NewPCG(5, 6))
	before := srv.RingRequests()
	ios := uint64(0)
	for _, c := range []struct {
		off int64
		n   int
	}{{0, 4096}, {5, 3}, {4095, 2}, {1 << 20, 1 << 20}, {777, 2<<20 + 5}, {16<<20 - 10, 10}} {
		p := make([]byte, c.n)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		if _, err := f.WriteAt(p, c.off); err != nil {
			t.Fatalf("write %d at %d: %v", c.n, c.off, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync: %v", err)
		}
		if !bytes.Equal(st.Mapping().Bytes()[c.off:c.off+int64(c.n)], p) {
			t.Fatalf("write %d at %d did not reach the LUN", c.n, c.off)
		}
		q := make([]byte, c.n)
		if _, err := f.ReadAt(q, c.off); err != nil || !bytes.Equal(p, q) {
			t.Fatalf("read back %d at %d: %v, equal %v", c.n, c.off, err, bytes.Equal(p, q))
		}
		ios += 3
	}
	if got := srv.RingRequests() - before; got < ios {
		t.Fatalf("%d requests over the ring for %d writes, fsyncs and reads", got, ios)
	}
	if _, err := f.WriteAt([]byte{1, 2}, 16<<20-1); !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EFBIG) {
		t.Errorf("write across the end: %v, want ENOSPC", err)
	}
	if n, err := f.ReadAt(make([]byte, 10), 16<<20); n != 0 {
		t.Errorf("read at the end: %d, %v", n, err)
	}
	if err := f.Truncate(1 << 20); !errors.Is(err, unix.EPERM) {
		t.Errorf("truncate: %v, want EPERM", err)
	}
	// The rest of the filesystem over the ring too: the root's listing,
	// attributes, statfs, a refused create.
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "lun0" {
		t.Fatalf("readdir: %v %v", ents, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "lun0")); err != nil || fi.Size() != 16<<20 {
		t.Fatalf("stat: %v %v", fi, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || uint64(sfs.Blocks)*uint64(sfs.Bsize) != 16<<20 {
		t.Errorf("statfs: %+v %v", sfs, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); err == nil {
		t.Error("created a file in the root")
	}
	if _, err := os.Stat(filepath.Join(dir, "lun9")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of an absent LUN's file: %v", err)
	}
	// A busy mount stays mounted and served.
	if err := srv.Unmount(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("unmount with a file open: %v, want EBUSY", err)
	}
	if _, err := f.ReadAt(make([]byte, 512), 0); err != nil {
		t.Fatalf("read after a refused unmount: %v", err)
	}
}

// TestRingODirectParallel: O_DIRECT writers and readers of 1 MiB and
// 4 KiB on one file at once, over the ring, each verified.
func TestRingODirectParallel(t *testing.T) {
	setURing(t, true)
	st := testtarget.Memory(t, 64<<20)
	dir, srv := mountServer(t, lunfs.Options{DirectIO: true, IOURing: lunfs.IOURingOn}, st)
	before := srv.RingRequests()
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd, err := unix.Open(filepath.Join(dir, "lun0"), unix.O_RDWR|unix.O_DIRECT, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(fd)
			bs := 4096
			if w%2 == 0 {
				bs = 1 << 20
			}
			buf, back := alignedBuf(bs), alignedBuf(bs)
			for i := range 6 {
				off := int64((i*workers + w) * (1 << 20))
				for j := range buf {
					buf[j] = byte(w*31 + i + j)
				}
				if n, err := unix.Pwrite(fd, buf, off); err != nil || n != bs {
					t.Errorf("pwrite: %d, %v", n, err)
					return
				}
				if n, err := unix.Pread(fd, back, off); err != nil || n != bs || !bytes.Equal(buf, back) {
					t.Errorf("pread: %d, %v, equal %v", n, err, bytes.Equal(buf, back))
					return
				}
				if !bytes.Equal(st.Mapping().Bytes()[off:off+int64(bs)], buf) {
					t.Errorf("worker %d: block %d is not on the LUN", w, i)
					return
				}
			}
			if err := unix.Fsync(fd); err != nil {
				t.Errorf("fsync: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := srv.RingRequests() - before; got < workers*6*2 {
		t.Fatalf("%d requests over the ring for %d reads and writes", got, workers*6*2)
	}
}

// TestRingFallback: with the kernel's switch off, auto serves through
// /dev/fuse and still works, and on refuses to mount.
func TestRingFallback(t *testing.T) {
	setURing(t, false)
	st := testtarget.Memory(t, 1<<20)
	dir, srv := mountServer(t, lunfs.Options{DirectIO: true, IOURing: lunfs.IOURingAuto}, st)
	if srv.IOURing() {
		t.Fatal("io_uring in use with the kernel's switch off")
	}
	p := bytes.Repeat([]byte("fallback"), 512)
	f, err := os.OpenFile(filepath.Join(dir, "lun0"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.Mapping().Bytes()[:len(p)], p) {
		t.Fatal("the write did not reach the LUN")
	}
	if srv.RingRequests() != 0 {
		t.Fatalf("%d requests over a ring that is off", srv.RingRequests())
	}
	fs := lunfs.New(nil, 1, lunfs.Options{IOURing: lunfs.IOURingOn})
	if s, err := fs.Mount(t.TempDir()); err == nil {
		s.Unmount()
		t.Fatal("io_uring on mounted with the kernel's switch off")
	} else if !strings.Contains(err.Error(), "enable_uring") {
		t.Errorf("the error does not say why: %v", err)
	}
}

func TestCheckIOURing(t *testing.T) {
	for _, m := range []string{"", "auto", "on", "off"} {
		if err := lunfs.CheckIOURing(m); err != nil {
			t.Errorf("%q: %v", m, err)
		}
	}
	if err := lunfs.CheckIOURing("yes"); err == nil {
		t.Error("yes accepted")
	}
}

// TestRingOff: off, and the default (no mode), serve through /dev/fuse
// even where the kernel offers the ring; auto takes the ring there.
func TestRingOff(t *testing.T) {
	setURing(t, true)
	for _, mode := range []string{lunfs.IOURingOff, "", lunfs.IOURingAuto} {
		st := testtarget.Memory(t, 1<<20)
		dir, srv := mountServer(t, lunfs.Options{DirectIO: true, IOURing: mode}, st)
		if want := mode == lunfs.IOURingAuto; srv.IOURing() != want {
			t.Fatalf("mode %q: io_uring in use %v, want %v", mode, srv.IOURing(), want)
		}
		p := bytes.Repeat([]byte(mode+"."), 512)
		f, err := os.OpenFile(filepath.Join(dir, "lun0"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(p, 0)
		f.Close()
		if err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		if !bytes.Equal(st.Mapping().Bytes()[:len(p)], p) {
			t.Fatalf("mode %q: the write did not reach the LUN", mode)
		}
		if n := srv.RingRequests(); (n != 0) != (mode == lunfs.IOURingAuto) {
			t.Fatalf("mode %q: %d requests over the ring", mode, n)
		}
	}
}
