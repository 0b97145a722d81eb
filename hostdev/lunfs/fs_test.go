package lunfs_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/hostdev/lunfs"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"golang.org/x/sys/unix"
)

// needFUSE skips, saying why, where this process cannot mount FUSE.
func needFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE in this kernel: %v", err)
	}
}

// mount serves stores as LUNs and mounts them; it returns the mount point.
func mount(t *testing.T, o lunfs.Options, stores ...blockdev.Store) string {
	t.Helper()
	dir, _ := mountServer(t, o, stores...)
	return dir
}

// mountServer is mount that returns the server too.
func mountServer(t *testing.T, o lunfs.Options, stores ...blockdev.Store) (string, *lunfs.Server) {
	t.Helper()
	dir, srv, _ := mountSlots(t, o, 16, stores...)
	return dir, srv
}

// mountSlots is mountServer with nslots buffer slots, which it returns.
func mountSlots(t *testing.T, o lunfs.Options, nslots int, stores ...blockdev.Store) (string, *lunfs.Server, *remote.Slots) {
	t.Helper()
	needFUSE(t)
	testtarget.CheckLeaks(t)
	tt := testtarget.Start(t, stores...)
	s := tt.Dial(t, initiator.Config{Buffers: 32 << 20})
	slots, err := remote.NewSlots(s, nslots, 1<<20+2*4096)
	if err != nil {
		t.Fatal(err)
	}
	var disks []*remote.Disk
	for i := range stores {
		d, err := remote.Open(context.Background(), s, uint16(i), slots)
		if err != nil {
			t.Fatal(err)
		}
		disks = append(disks, d)
	}
	if o.MaxWrite == 0 {
		o.MaxWrite = 1 << 20
	}
	o.Name = testtarget.TargetName
	fs := lunfs.New(disks, nslots, o)
	dir := t.TempDir()
	srv, err := fs.Mount(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
		slots.Close()
	})
	return dir, srv, slots
}

func TestFilesPerLUN(t *testing.T) {
	dir := mount(t, lunfs.Options{DirectIO: true}, testtarget.Memory(t, 8<<20), testtarget.Memory(t, 3<<20))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "lun0" || names[1] != "lun1" {
		t.Fatalf("files %v, want [lun0 lun1]", names)
	}
	for name, size := range map[string]int64{"lun0": 8 << 20, "lun1": 3 << 20} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != size || !fi.Mode().IsRegular() {
			t.Errorf("%s: size %d mode %v, want %d, regular", name, fi.Size(), fi.Mode(), size)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lun2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of an absent LUN's file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); err == nil {
		t.Error("created a file in the root")
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || uint64(sfs.Blocks)*uint64(sfs.Bsize) != 11<<20 {
		t.Errorf("statfs: %+v %v", sfs, err)
	}
}

func TestReadWrite(t *testing.T) {
	for _, direct := range []bool{true, false} {
		name := "direct_io"
		if !direct {
			name = "page_cache"
		}
		t.Run(name, func(t *testing.T) {
			st := testtarget.Memory(t, 16<<20)
			dir := mount(t, lunfs.Options{DirectIO: direct}, st)
			f, err := os.OpenFile(filepath.Join(dir, "lun0"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := rand.New(rand.NewPCG(3, 4))
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
			}
			if _, err := f.WriteAt([]byte{1, 2}, 16<<20-1); !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EFBIG) {
				t.Errorf("write across the end: %v, want ENOSPC", err)
			}
			if n, err := f.ReadAt(make([]byte, 10), 16<<20); n != 0 {
				t.Errorf("read at the end: %d, %v", n, err)
			}
			if err := f.Truncate(1 << 20); !errors.Is(err, syscall.EPERM) {
				t.Errorf("truncate: %v, want EPERM", err)
			}
		})
	}
}

// TestODirectParallel: O_DIRECT writers and readers on one file, each on
// its own blocks, as fio with direct=1 does.
func TestODirectParallel(t *testing.T) {
	st := testtarget.Memory(t, 32<<20)
	dir := mount(t, lunfs.Options{DirectIO: true}, st)
	const workers, bs = 8, 64 << 10
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
			buf := alignedBuf(bs)
			back := alignedBuf(bs)
			for i := range 16 {
				off := int64((i*workers + w) * bs)
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
			}
		}()
	}
	wg.Wait()
}

func TestReadOnlyLUN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.img")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := blockdev.OpenFile(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := mount(t, lunfs.Options{DirectIO: true}, st)
	fi, err := os.Stat(filepath.Join(dir, "lun0"))
	if err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("mode of a read-only LUN's file: %v %v", fi.Mode(), err)
	}
	if _, err := os.OpenFile(filepath.Join(dir, "lun0"), os.O_WRONLY, 0); !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) {
		t.Errorf("open for writing: %v, want EROFS", err)
	}
}

// alignedBuf is n octets aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off%4096 : off%4096+n]
}
