package uring

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing skips where this kernel or process has no io_uring.
func newRing(t *testing.T, entries, flags uint32) *Ring {
	t.Helper()
	r, err := New(entries, flags)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestRingNop submits NOPs through the raw ring and reaps their
// completions, with each SQE and CQE size.
func TestRingNop(t *testing.T) {
	for _, flags := range []uint32{0, SetupSQE128, SetupSQE128 | SetupCQE32} {
		r := newRing(t, 8, flags)
		if r.Entries() != 8 {
			t.Fatalf("%d entries, want 8", r.Entries())
		}
		for round := range 3 { // past the ring's end: indexes wrap
			for i := range 8 {
				e, err := r.SQE()
				if err != nil {
					t.Fatalf("flags %#x, round %d, SQE %d: %v", flags, round, i, err)
				}
				PutNop(e, uint64(round*100+i))
			}
			if _, err := r.SQE(); !errors.Is(err, ErrFull) {
				t.Fatalf("a ninth SQE: %v", err)
			}
			seen := map[uint64]bool{}
			if err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			for len(seen) < 8 {
				if err := r.Wait(1); err != nil {
					t.Fatal(err)
				}
				r.Reap(func(ud uint64, res int32) {
					if res != 0 || ud/100 != uint64(round) || seen[ud] {
						t.Fatalf("flags %#x: completion %d: %d", flags, ud, res)
					}
					seen[ud] = true
				})
			}
		}
	}
}

// TestPollEventfd arms a poll on an eventfd and completes it by writing
// the eventfd.
func TestPollEventfd(t *testing.T) {
	r := newRing(t, 4, SetupSQE128)
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const tag = 1 << 63
	e, _ := r.SQE()
	PutPoll(e, fd, tag)
	if err := r.Enter(0); err != nil {
		t.Fatal(err)
	}
	if r.Ready() != 0 {
		t.Fatal("the poll completed before the eventfd was written")
	}
	unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if err := r.Enter(1); err != nil {
		t.Fatal(err)
	}
	n := r.Reap(func(ud uint64, res int32) {
		if ud != tag || res&unix.POLLIN == 0 {
			t.Fatalf("completion %#x: %#x", ud, res)
		}
	})
	if n != 1 {
		t.Fatalf("%d completions", n)
	}
}

// TestPutCmdVec: the command, its address and its length land where the
// kernel reads them.
func TestPutCmdVec(t *testing.T) {
	e := make([]byte, 128)
	var x [2]uint64
	PutCmdVec(e, 7, 2, 0xabc, unsafe.Pointer(&x[0]), 2, []byte{9, 8, 7})
	if e[SQEOpcode] != OpURingCmd || *(*int32)(unsafe.Pointer(&e[SQEFD])) != 7 ||
		*(*uint32)(unsafe.Pointer(&e[SQEOff])) != 2 || *(*uint64)(unsafe.Pointer(&e[SQEUserData])) != 0xabc ||
		*(*uint64)(unsafe.Pointer(&e[SQEAddr])) != uint64(uintptr(unsafe.Pointer(&x[0]))) ||
		*(*uint32)(unsafe.Pointer(&e[SQELen])) != 2 || e[SQECmd] != 9 || e[SQECmd+2] != 7 {
		t.Fatalf("SQE % x", e[:64])
	}
}

// TestWaitWhileSubmitting: one goroutine waits while another submits, the
// split a server with many request handlers and one reaper uses.
func TestWaitWhileSubmitting(t *testing.T) {
	r := newRing(t, 16, SetupSQE128)
	const n = 200
	done := make(chan int)
	go func() {
		got := 0
		for got < n {
			if err := r.Wait(1); err != nil {
				t.Error(err)
				break
			}
			got += r.Reap(func(uint64, int32) {})
		}
		done <- got
	}()
	for i := range n {
		for {
			e, err := r.SQE()
			if errors.Is(err, ErrFull) {
				r.Submit()
				continue
			}
			PutNop(e, uint64(i))
			break
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-done; got != n {
		t.Fatalf("%d completions, want %d", got, n)
	}
}

// TestReadEventfd: a READ of a blocking eventfd waits in the ring until
// the eventfd is written, and brings the count.
func TestReadEventfd(t *testing.T) {
	r := newRing(t, 4, SetupSQE128)
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	e, _ := r.SQE()
	PutRead(e, fd, unsafe.Pointer(&buf[0]), 8, ^uint64(0), 7)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if r.Ready() != 0 {
		t.Fatal("the read completed before the eventfd was written")
	}
	unix.Write(fd, []byte{3, 0, 0, 0, 0, 0, 0, 0})
	if err := r.Wait(1); err != nil {
		t.Fatal(err)
	}
	r.Reap(func(ud uint64, res int32) {
		if ud != 7 || res != 8 || buf[0] != 3 {
			t.Fatalf("completion %d: %d, count %d", ud, res, buf[0])
		}
	})
}
