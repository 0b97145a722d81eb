//go:build cgo

package rbd

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ddpstore/ddpstore/internal/cephtest"
	"golang.org/x/sys/unix"
)

const (
	mib = 1 << 20
	obj = 4 * mib // RBD's default object size
)

// TestImage runs every test against one cluster: starting one takes
// seconds.
func TestImage(t *testing.T) {
	c := cephtest.Start(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *cephtest.Cluster)
	}{
		{"Size", testSize},
		{"Patterns", testPatterns},
		{"MappedBuffer", testMappedBuffer},
		{"Concurrent", testConcurrent},
		{"Discard", testDiscard},
		{"Thin", testThin},
		{"ReadOnly", testReadOnly},
		{"OpenErrors", testOpenErrors},
		{"Ranges", testRanges},
		{"Close", testClose},
		{"Blocklisted", testBlocklisted},
		{"NoCache", testNoCache},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, c) })
	}
}

// open creates an image of size octets named after the test and opens it.
func open(t *testing.T, c *cephtest.Cluster, size int64) (*Image, Config) {
	t.Helper()
	name := strings.ReplaceAll(t.Name(), "/", "-")
	c.CreateImage(t, name, size)
	cfg := Config{Pool: c.Pool(), Image: name, Conf: c.Conf()}
	im, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := im.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Error(err)
		}
	})
	return im, cfg
}

// pattern fills p with octets that depend on their offset in the image
// and on seed, so that data written to the wrong place is told apart.
func pattern(p []byte, off int64, seed byte) {
	for i := range p {
		o := off + int64(i)
		p[i] = byte(o) ^ byte(o>>9) ^ byte(o>>17) ^ seed
	}
}

func checkPattern(t *testing.T, what string, p []byte, off int64, seed byte) {
	t.Helper()
	want := make([]byte, len(p))
	pattern(want, off, seed)
	if i := firstDiff(p, want); i >= 0 {
		t.Fatalf("%s: octet %d (image offset %d) is %#x, want %#x", what, i, off+int64(i), p[i], want[i])
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

func checkZeros(t *testing.T, what string, p []byte, off int64) {
	t.Helper()
	for i, b := range p {
		if b != 0 {
			t.Fatalf("%s: octet at image offset %d is %#x, want 0", what, off+int64(i), b)
		}
	}
}

func testSize(t *testing.T, c *cephtest.Cluster) {
	im, _ := open(t, c, 64*mib+512)
	if im.Size() != 64*mib+512 {
		t.Errorf("Size %d, want %d", im.Size(), 64*mib+512)
	}
	if im.ReadOnly() || !im.Thin() {
		t.Errorf("ReadOnly %v Thin %v, want false and true", im.ReadOnly(), im.Thin())
	}
}

// The extents written: aligned and not, inside one object, across object
// boundaries, spanning several objects, at both ends of the image.
var extents = []struct{ off, n int64 }{
	{0, 512},
	{4096, 4096},
	{obj - 512, 1024},
	{mib + 123, 2*mib + 7},
	{2*obj - 3*mib, 9 * mib},
	{5*obj + 1, 1},
	{6*obj - 64*1024, 128 * 1024},
	{8*obj - 4096, 4096},
}

func testPatterns(t *testing.T, c *cephtest.Cluster) {
	im, cfg := open(t, c, 8*obj)
	for i, e := range extents {
		p := make([]byte, e.n)
		pattern(p, e.off, byte(i))
		if err := im.WriteAt(p, e.off); err != nil {
			t.Fatal(err)
		}
	}
	check := func(im *Image, how string) {
		t.Helper()
		whole := make([]byte, im.Size())
		// Read in pieces of odd sizes, so reads too cross objects.
		for off := int64(0); off < im.Size(); {
			n := min(im.Size()-off, 3*mib+512*7)
			if err := im.ReadAt(whole[off:off+n], off); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		want := make([]byte, im.Size())
		for i, e := range extents {
			pattern(want[e.off:e.off+e.n], e.off, byte(i))
		}
		if i := firstDiff(whole, want); i >= 0 {
			t.Fatalf("%s: image octet %d is %#x, want %#x", how, i, whole[i], want[i])
		}
		// And each extent alone, read at exactly its place.
		for i, e := range extents {
			p := make([]byte, e.n)
			if err := im.ReadAt(p, e.off); err != nil {
				t.Fatal(err)
			}
			checkPattern(t, fmt.Sprintf("%s: extent %d", how, i), p, e.off, byte(i))
		}
	}
	check(im, "same handle")
	if err := im.Sync(0, im.Size()); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	im2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer im2.Close()
	check(im2, "reopened")

	// What librbd's own command reads is the same.
	out := filepath.Join(t.TempDir(), "export")
	c.RBD(t, "export", cfg.Pool+"/"+cfg.Image, out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, im2.Size())
	for i, e := range extents {
		pattern(want[e.off:e.off+e.n], e.off, byte(i))
	}
	if i := firstDiff(got, want); i >= 0 || len(got) != len(want) {
		t.Fatalf("rbd export: %d octets, first difference at %d", len(got), i)
	}
}

// testMappedBuffer reads and writes through memory that is not Go's, as
// the target's registered regions are.
func testMappedBuffer(t *testing.T, c *cephtest.Cluster) {
	im, _ := open(t, c, 2*obj)
	m, err := unix.Mmap(-1, 0, 6*mib, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	const off = obj - 2*mib + 512
	pattern(m[:5*mib], off, 7)
	if err := im.WriteAt(m[:5*mib], off); err != nil {
		t.Fatal(err)
	}
	clear(m)
	if err := im.ReadAt(m[mib:6*mib], off); err != nil {
		t.Fatal(err)
	}
	checkPattern(t, "read into mmap'd memory", m[mib:6*mib], off, 7)
	checkZeros(t, "mmap'd memory before the read's buffer", m[:mib], 0)
}

// testConcurrent has many goroutines write, read back and flush their own
// stripes of one image at once, with garbage collections in between (the
// buffers are Go memory, pinned while librbd holds them).
func testConcurrent(t *testing.T, c *cephtest.Cluster) {
	const workers, stripe = 16, 2 * mib
	im, _ := open(t, c, workers*stripe)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			base := int64(w) * stripe
			for i := range 24 {
				n := (1 + rng.Int64N(64)) * 512 * int64(1+rng.IntN(4))
				off := base + rng.Int64N(stripe-n+1)
				seed := byte(w*31 + i)
				p := make([]byte, n)
				pattern(p, off, seed)
				if err := im.WriteAt(p, off); err != nil {
					errs <- err
					return
				}
				if i%5 == 0 {
					runtime.GC()
				}
				q := make([]byte, n)
				if err := im.ReadAt(q, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(p, q) {
					errs <- fmt.Errorf("worker %d: read at %d+%d differs from what it wrote (first at %d)", w, off, n, firstDiff(p, q))
					return
				}
				if i%8 == 0 {
					if err := im.Sync(0, im.Size()); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testDiscard discards and write-zeroes ranges aligned and not, and checks
// that they read back as zeros while what is around them is unchanged.
func testDiscard(t *testing.T, c *cephtest.Cluster) {
	im, _ := open(t, c, 4*obj)
	all := make([]byte, im.Size())
	pattern(all, 0, 3)
	if err := im.WriteAt(all, 0); err != nil {
		t.Fatal(err)
	}
	ranges := []struct {
		zeroes bool
		off, n int64
	}{
		{false, 512 * 3, 512},                  // inside one 4 KiB block
		{false, 8192 + 512, 64*1024 + 1024},    // unaligned ends around aligned blocks
		{false, obj - mib - 512, 2*mib + 1024}, // across an object boundary
		{false, 2 * obj, obj},                  // one whole object
		{true, mib + 7, 100},                   // write zeroes, unaligned
		{true, 3*obj + 4096, mib},              // write zeroes, aligned
	}
	for _, r := range ranges {
		f := im.Discard
		if r.zeroes {
			f = im.WriteZeroes
		}
		if err := f(r.off, r.n); err != nil {
			t.Fatal(err)
		}
		clear(all[r.off : r.off+r.n])
	}
	got := make([]byte, im.Size())
	if err := im.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, all); i >= 0 {
		t.Fatalf("after discards, image octet %d is %#x, want %#x", i, got[i], all[i])
	}
}

// testThin checks that discarding an image's data gives its objects back.
func testThin(t *testing.T, c *cephtest.Cluster) {
	im, cfg := open(t, c, 4*obj)
	prefix := ""
	for _, l := range strings.Split(c.RBD(t, "info", cfg.Pool+"/"+cfg.Image), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "block_name_prefix:" {
			prefix = f[1]
		}
	}
	if prefix == "" {
		t.Fatal("rbd info shows no block_name_prefix")
	}
	objects := func() int {
		k := 0
		for _, o := range c.Objects(t, cfg.Pool) {
			if strings.HasPrefix(o, prefix+".") {
				k++
			}
		}
		return k
	}
	p := make([]byte, im.Size())
	pattern(p, 0, 9)
	if err := im.WriteAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := im.Sync(0, im.Size()); err != nil {
		t.Fatal(err)
	}
	if k := objects(); k != 4 {
		t.Fatalf("%d data objects after writing 4 objects' worth, want 4", k)
	}
	// Three objects and a half: three go, the half is zeroed in place.
	if err := im.Discard(obj/2, im.Size()-obj/2); err != nil {
		t.Fatal(err)
	}
	if err := im.Sync(0, im.Size()); err != nil {
		t.Fatal(err)
	}
	if k := objects(); k != 1 {
		t.Errorf("%d data objects after discarding all but half of the first, want 1", k)
	}
	q := make([]byte, im.Size())
	if err := im.ReadAt(q, 0); err != nil {
		t.Fatal(err)
	}
	checkPattern(t, "kept half object", q[:obj/2], 0, 9)
	checkZeros(t, "discarded", q[obj/2:], obj/2)
}

func testReadOnly(t *testing.T, c *cephtest.Cluster) {
	rw, cfg := open(t, c, obj)
	p := make([]byte, 64*1024)
	pattern(p, 4096, 5)
	if err := rw.WriteAt(p, 4096); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.ReadOnly = true
	ro, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() || ro.Thin() {
		t.Errorf("ReadOnly %v Thin %v, want true and false", ro.ReadOnly(), ro.Thin())
	}
	q := make([]byte, len(p))
	if err := ro.ReadAt(q, 4096); err != nil {
		t.Fatal(err)
	}
	checkPattern(t, "read-only image", q, 4096, 5)
	for name, f := range map[string]func() error{
		"write":        func() error { return ro.WriteAt(q, 0) },
		"discard":      func() error { return ro.Discard(0, 4096) },
		"write zeroes": func() error { return ro.WriteZeroes(0, 4096) },
	} {
		err := f()
		want := "rbd: " + name + " " + cfg.Pool + "/" + cfg.Image + ": read-only file system (opened read-only)"
		if err == nil || err.Error() != want || !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only image: %v, want %q", name, err, want)
		}
	}
	if err := ro.Sync(0, ro.Size()); err != nil {
		t.Errorf("Sync of a read-only image: %v", err)
	}
	if err := ro.ReadAt(q, 4096); err != nil {
		t.Fatal(err)
	}
	checkPattern(t, "read-only image after refused writes", q, 4096, 5)
}

func testOpenErrors(t *testing.T, c *cephtest.Cluster) {
	c.CreateImage(t, "exists", mib)
	dir := t.TempDir()
	otherKeyring := filepath.Join(dir, "other.keyring")
	if out, err := exec.Command("ceph-authtool", "--create-keyring", otherKeyring, "--gen-key", "-n", "client.admin").CombinedOutput(); err != nil {
		t.Fatalf("ceph-authtool: %v: %s", err, out)
	}
	for _, tc := range []struct {
		cfg   Config
		want  string
		errno syscall.Errno
	}{
		{Config{Pool: "rbd", Image: "nope", Conf: c.Conf()},
			"rbd: open rbd/nope: no such file or directory", syscall.ENOENT},
		{Config{Pool: "nopool", Image: "exists", Conf: c.Conf()},
			"rbd: open nopool/exists: pool nopool: no such file or directory", syscall.ENOENT},
		{Config{Pool: "rbd", Image: "exists", Conf: filepath.Join(dir, "missing.conf")},
			"rbd: open rbd/exists: read conf " + filepath.Join(dir, "missing.conf") + ": no such file or directory", syscall.ENOENT},
		{Config{Pool: "rbd", Image: "exists", Conf: c.Conf(), User: "nobody"},
			"rbd: open rbd/exists: connect as client.nobody: permission denied", syscall.EACCES},
		{Config{Pool: "rbd", Image: "exists", Conf: c.Conf(), Keyring: otherKeyring},
			"rbd: open rbd/exists: connect as client.admin: permission denied", syscall.EACCES},
		{Config{Pool: "rbd", Conf: c.Conf()},
			"rbd: open rbd/: both a pool and an image must be named", 0},
	} {
		im, err := Open(tc.cfg)
		if err == nil {
			im.Close()
			t.Errorf("Open(%+v) succeeded", tc.cfg)
			continue
		}
		if err.Error() != tc.want || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%+v):\n got %q\nwant %q", tc.cfg, err, tc.want)
		}
		if tc.errno != 0 && !errors.Is(err, tc.errno) {
			t.Errorf("Open(%+v): %v is not %v", tc.cfg, err, tc.errno)
		}
	}
	// The cluster's own keyring, named explicitly, and the user named.
	im, err := Open(Config{Pool: "rbd", Image: "exists", Conf: c.Conf(), User: c.User(), Keyring: c.Keyring()})
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
}

func testRanges(t *testing.T, c *cephtest.Cluster) {
	im, cfg := open(t, c, mib)
	p := make([]byte, 4096)
	name := cfg.Pool + "/" + cfg.Image
	for _, tc := range []struct {
		err  error
		want string
	}{
		{im.ReadAt(p, mib-2048), "rbd: read " + name + " [1046528, +4096): outside the image's 1048576 octets"},
		{im.WriteAt(p, -1), "rbd: write " + name + " [-1, +4096): outside the image's 1048576 octets"},
		{im.Discard(0, mib+1), "rbd: discard " + name + " [0, +1048577): outside the image's 1048576 octets"},
		{im.WriteZeroes(1<<62, 1<<62), "rbd: write zeroes " + name + " [4611686018427387904, +4611686018427387904): outside the image's 1048576 octets"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("got %v, want %q", tc.err, tc.want)
		}
	}
	// Empty requests at the end are fine.
	if err := im.ReadAt(nil, mib); err != nil {
		t.Error(err)
	}
	if err := im.Discard(mib, 0); err != nil {
		t.Error(err)
	}
}

// testClose checks that opening, using and closing images leaves no file
// descriptor, thread or goroutine behind, and that a closed image refuses
// requests.
func testClose(t *testing.T, c *cephtest.Cluster) {
	c.CreateImage(t, "close", 2*obj)
	cfg := Config{Pool: c.Pool(), Image: "close", Conf: c.Conf()}
	cycle := func() {
		im, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, obj+4096)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				if err := im.WriteAt(p, int64(i)*4096); err != nil {
					t.Error(err)
				}
				if err := im.ReadAt(p[:4096], int64(i)*4096); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := im.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // librados's process-wide state is set up once
	fds, threads, goroutines := countFDs(t), countThreads(t), runtime.NumGoroutine()
	for range 3 {
		cycle()
	}
	if n := countFDs(t); n != fds {
		t.Errorf("%d file descriptors after 3 open-use-close cycles, %d before", n, fds)
	}
	// librados runs a dozen threads per connection; Go may have started an
	// M or two meanwhile.
	if n := countThreads(t); n > threads+3 {
		t.Errorf("%d threads after 3 open-use-close cycles, %d before", n, threads)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after 3 open-use-close cycles, %d before", n, goroutines)
	}

	im, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 512)
	if err := im.ReadAt(p, 0); !errors.Is(err, os.ErrClosed) || err.Error() != "rbd: read rbd/close: file already closed" {
		t.Errorf("ReadAt after Close: %v", err)
	}
	if err := im.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

func countThreads(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

// testBlocklisted has the cluster blocklist the image's client, as a
// gateway that takes over an image's lock does to the one it took it from:
// requests then fail with librbd's error, carried back by the completion,
// as one line.
func testBlocklisted(t *testing.T, c *cephtest.Cluster) {
	im, cfg := open(t, c, obj)
	p := make([]byte, 4096)
	if err := im.WriteAt(p, 0); err != nil {
		t.Fatal(err)
	}
	status := c.RBD(t, "status", cfg.Pool+"/"+cfg.Image)
	addr := ""
	for _, l := range strings.Split(status, "\n") {
		// "watcher=127.0.0.1:0/3719386478 client.4133 cookie=..."
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "watcher=") {
			addr = strings.TrimPrefix(f[0], "watcher=")
		}
	}
	if addr == "" {
		t.Fatalf("rbd status shows no watcher: %s", status)
	}
	c.Ceph(t, "osd", "blocklist", "add", addr)
	var err error
	// The OSD learns of the blocklist with the next OSD map; a request
	// may still get through before.
	for i := 0; i < 50 && err == nil; i++ {
		err = im.WriteAt(p, int64(i)*4096)
	}
	want := fmt.Sprintf("rbd: write %s/%s [", cfg.Pool, cfg.Image)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, syscall.ESHUTDOWN) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("write by a blocklisted client: %v, want %q... wrapping %v", err, want, syscall.ESHUTDOWN)
	}
	t.Log(err)
	// Closing does not hang on a blocklisted client (its error is librbd's).
	if err := im.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
}
