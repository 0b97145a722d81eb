package spin

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwaited drives Awaited over a net.Pipe, whose reads wake on a read
// deadline as the poller's do: the receiver blocks unless an answer is
// awaited, polls instead when it is (before it blocks, or while it does:
// the kick), leaves no deadline behind, and never overrides the owner's.
func TestAwaited(t *testing.T) {
	c, peer := net.Pipe()
	defer c.Close()
	defer peer.Close()
	var a Awaited
	buf := make([]byte, 8)
	var polls atomic.Int32
	var n int
	poll := func() (bool, error) { polls.Add(1); return true, nil } // the answer is there
	block := func() (err error) { n, err = c.Read(buf); return err }
	type result struct {
		polled, caught bool
		err            error
	}
	wait := func() <-chan result {
		r := make(chan result, 1)
		go func() {
			p, k, err := a.Wait(c, poll, block)
			r <- result{p, k, err}
		}()
		return r
	}
	parked := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !a.Parked(); {
			if time.Now().After(deadline) {
				t.Fatal("the receiver never blocked")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond) // into the read
	}
	get := func(r <-chan result, want result, wantPolls int32) {
		t.Helper()
		select {
		case got := <-r:
			if got.polled != want.polled || got.caught != want.caught || !errors.Is(got.err, want.err) {
				t.Fatalf("Wait: polled %v, caught %v, %v; want %v, %v, %v", got.polled, got.caught, got.err, want.polled, want.caught, want.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait never returned")
		}
		if p := polls.Load(); p != wantPolls {
			t.Fatalf("%d polls, want %d", p, wantPolls)
		}
	}
	send := func(s string) {
		go peer.Write([]byte(s))
	}

	// Not awaited: the block's read takes the message.
	r := wait()
	parked()
	send("a")
	get(r, result{}, 0)
	if string(buf[:n]) != "a" {
		t.Fatalf("read %q", buf[:n])
	}

	// Awaited while blocked: the kick wakes it to poll.
	r = wait()
	parked()
	a.Await(c)
	get(r, result{polled: true, caught: true}, 1)

	// The kick's deadline is gone: the next block waits for its message.
	r = wait()
	parked()
	time.Sleep(20 * time.Millisecond)
	send("b")
	get(r, result{}, 1)

	// Awaited before it blocks: it polls first and never blocks.
	a.Await(c)
	get(wait(), result{polled: true, caught: true}, 2)

	// A kick that no wait took (it came as the receiver stopped waiting)
	// fails the next read once; Retry takes it back.
	a.parked.Store(true)
	a.Await(c)
	a.parked.Store(false)
	a.awaited.Store(false)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after a kick: %v, want the kick's timeout", err)
	}
	if !a.Retry(c) {
		t.Fatal("Retry did not see the kick")
	}
	if a.Retry(c) {
		t.Fatal("Retry saw a kick twice")
	}
	send("c")
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "c" {
		t.Fatalf("read after Retry: %q, %v", buf[:n], err)
	}

	// The owner's deadline stands: a kick neither moves nor clears it.
	a.SetReadDeadline(c, time.Now().Add(50*time.Millisecond))
	r = wait()
	parked()
	a.Await(c)
	get(r, result{err: os.ErrDeadlineExceeded}, 2)
	a.SetReadDeadline(c, time.Time{})
	a.awaited.Store(false)

	// A kick, then the owner's deadline, racing the kick's wake-up:
	// either way the awaited answer is polled for, and the owner's
	// deadline stands afterwards.
	r = wait()
	parked()
	a.Await(c) // kicks: no owner's deadline yet
	a.SetReadDeadline(c, time.Now().Add(30*time.Millisecond))
	get(r, result{polled: true, caught: true}, 3)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the kick: %v, want the owner's deadline", err)
	}
}
