package lunfs_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/lunfs"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"golang.org/x/sys/unix"
)

var errMismatch = errors.New("read back differs from what was written")

// TestClassicWorkersOwnSlots: through /dev/fuse, a READ and a WRITE of
// whole blocks run in the slot their worker read the request into, with
// no slot of the pool (the one spare is held by the test all along), and
// so with no copy; a write of part of a block, which must read, patch and
// write back, waits for the pool's spare slot.
func TestClassicWorkersOwnSlots(t *testing.T) {
	st := testtarget.Memory(t, 4<<20)
	// Two slots: one worker's and the spare.
	dir, _, slots := mountSlots(t, lunfs.Options{DirectIO: true, IOURing: lunfs.IOURingOff}, 2, st)
	spare, ok := slots.TryTake()
	if !ok {
		t.Fatal("the pool has no spare slot")
	}
	released := false
	defer func() {
		if !released {
			spare.Release()
		}
	}()
	fd, err := unix.Open(filepath.Join(dir, "lun0"), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	const off, n = 1 << 20, 64 << 10
	w := alignedBuf(n)
	for i := range w {
		w[i] = byte(i*7 + 1)
	}
	done := make(chan error, 1)
	go func() {
		if _, err := unix.Pwrite(fd, w, off); err != nil {
			done <- err
			return
		}
		r := alignedBuf(n)
		if _, err := unix.Pread(fd, r, off); err != nil {
			done <- err
			return
		}
		if !bytes.Equal(r, w) {
			done <- errMismatch
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("aligned write and read back: %v", err)
		}
	case <-time.After(10 * time.Second):
		released = true
		spare.Release() // so that the I/O ends and the mount can go
		<-done
		t.Fatal("an aligned write or read waited for a slot of the pool: it did not run in its worker's slot")
	}
	if got := st.Mapping().Bytes()[off : off+n]; !bytes.Equal(got, w) {
		t.Fatal("the store does not hold what was written")
	}

	// Part of a block: read-modify-write through the pool's spare slot.
	part := []byte("part of a block")
	go func() {
		_, err := unix.Pwrite(fd, part, off+100)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a partial-block write finished (%v) while the spare slot was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	released = true
	spare.Release()
	if err := <-done; err != nil {
		t.Fatalf("partial-block write: %v", err)
	}
	if got := st.Mapping().Bytes()[off+100 : off+100+len(part)]; !bytes.Equal(got, part) {
		t.Fatalf("store holds %q after the partial-block write", got)
	}
	if got := st.Mapping().Bytes()[off : off+100]; !bytes.Equal(got, w[:100]) {
		t.Fatal("the partial-block write clobbered the octets before it")
	}
}

// TestClassicMostRecentWorkerReads: requests one at a time go to the same
// few workers (the one answering the last request, and the one waiting to
// read the next), not round all sixteen: each worker reads into a slot of
// its own, and a slot used a moment ago is still in the CPU's caches.
func TestClassicMostRecentWorkerReads(t *testing.T) {
	st := testtarget.Memory(t, 4<<20)
	dir, srv, _ := mountSlots(t, lunfs.Options{DirectIO: true, IOURing: lunfs.IOURingOff}, 17, st)
	fd, err := unix.Open(filepath.Join(dir, "lun0"), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := alignedBuf(4096)
	const ios = 64
	for i := range ios {
		if _, err := unix.Pread(fd, b, int64(i)*4096); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
	}
	unix.Close(fd)
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	reqs := srv.WorkerRequests()
	var total uint64
	for _, n := range reqs {
		total += n
	}
	if len(reqs) != 16 || total < ios {
		t.Fatalf("%d workers read %d requests in all, want 16 workers and at least %d", len(reqs), total, ios)
	}
	// The mount's own first requests come while the workers start, in
	// any order; the reads after them go to the same two, or now and
	// then a third: when the next request comes before the worker that
	// answered the last is back in line. In turn, each worker would
	// read four or five.
	top := slices.Sorted(slices.Values(reqs))
	if few := top[len(top)-1] + top[len(top)-2] + top[len(top)-3] + top[len(top)-4]; few < ios {
		t.Fatalf("the four busiest of 16 workers read %d of the %d requests, one at a time (%v): want all %d reads", few, total, reqs, ios)
	}
}
