package ublk

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRingNop submits NOPs through the raw ring and reaps their
// completions: the part of ublk's plumbing the host's kernel can run.
func TestRingNop(t *testing.T) {
	r, err := newRing(8)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if r.entries != 8 {
		t.Fatalf("%d entries, want 8", r.entries)
	}
	for round := range 3 { // past the ring's end: indexes wrap
		for i := range 8 {
			e, err := r.sqe()
			if err != nil {
				t.Fatalf("round %d, SQE %d: %v", round, i, err)
			}
			e[sqeOpcode] = opNop
			*(*uint64)(ptr(e[sqeUserData:])) = uint64(round*100 + i)
		}
		if _, err := r.sqe(); !errors.Is(err, errRingFull) {
			t.Fatalf("a ninth SQE: %v", err)
		}
		seen := map[uint64]bool{}
		for len(seen) < 8 {
			if err := r.enter(1); err != nil {
				t.Fatal(err)
			}
			r.reap(func(ud uint64, res int32) {
				if res != 0 || ud/100 != uint64(round) {
					t.Fatalf("completion %d: %d", ud, res)
				}
				seen[ud] = true
			})
		}
	}
}

// TestPollEventfd arms a poll on an eventfd, as a queue does to hear of
// finished requests, and completes it by writing the eventfd.
func TestPollEventfd(t *testing.T) {
	r, err := newRing(4)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer r.close()
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	e, _ := r.sqe()
	putPoll(e, fd, pollTag)
	if err := r.enter(0); err != nil {
		t.Fatal(err)
	}
	if r.ready() != 0 {
		t.Fatal("the poll completed before the eventfd was written")
	}
	unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if err := r.enter(1); err != nil {
		t.Fatal(err)
	}
	n := r.reap(func(ud uint64, res int32) {
		if ud != pollTag || res&unix.POLLIN == 0 {
			t.Fatalf("completion %#x: %#x", ud, res)
		}
	})
	if n != 1 {
		t.Fatalf("%d completions", n)
	}
}

// TestAvailableHere: on a kernel without ublk_drv, Available says so.
func TestAvailableHere(t *testing.T) {
	if _, err := os.Stat(ControlPath); err == nil {
		t.Skip("this kernel has ublk")
	}
	if err := Available(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Available() = %v, want a missing %s", err, ControlPath)
	}
}
