package iwarp

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/spin"
)

// tcpPair returns the two ends of a loopback TCP connection, closed at
// the test's end.
func tcpPair(t *testing.T) (*net.TCPConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	return c.(*net.TCPConn), peer
}

// TestSockTurnaround: a readv that polls times the peer's answer to this
// end's last write (spin.Turnaround), and only that: a message with no
// write of this end before it is no sample. The answers here come later
// than the bound, so each sample is exactly the clamp, whatever the
// machine's speed, and the spin stays at the base.
func TestSockTurnaround(t *testing.T) {
	c, peer := tcpPair(t)
	const base = 100 * time.Microsecond
	s, err := newSock(c, base)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	read := func() {
		t.Helper()
		if _, err := s.readv([][]byte{buf}, true); err != nil {
			t.Fatal(err)
		}
	}
	// Unasked: nothing written yet.
	peer.Write([]byte("a"))
	read()
	if _, n := s.turn.Smoothed(); n != 0 {
		t.Fatalf("%d samples before any write", n)
	}
	// Asked, answered after 5 ms: beyond the bound (4 x 100 µs), which
	// the poll gives up on, so the answer comes from the poller.
	if err := s.writev([][]byte{[]byte("q")}); err != nil {
		t.Fatal(err)
	}
	go func() {
		peer.Read(make([]byte, 1))
		time.Sleep(5 * time.Millisecond)
		peer.Write([]byte("b"))
		time.Sleep(5 * time.Millisecond)
		peer.Write([]byte("c"))
	}()
	read()
	clamp := 2 * spin.MaxFactor * base
	if d, n := s.turn.Smoothed(); n != 1 || d != clamp {
		t.Fatalf("after a 5 ms answer: %v over %d samples, want %v over 1", d, n, clamp)
	}
	if got := s.turn.Spin(s.spin); got != base {
		t.Fatalf("spin %v for a peer slower than the bound, want the base %v", got, base)
	}
	// The next message follows with no write between: no sample.
	read()
	if _, n := s.turn.Smoothed(); n != 1 {
		t.Fatalf("%d samples, want 1: a message that answers nothing was counted", n)
	}
}

// TestSockAwaitAnswer: with awaitedOnly the receiver sleeps in the poller
// between messages, unless the ULP awaits an answer: then it spins for
// it, whether it was already asleep (the kick) or not yet; the answer
// taken, it sleeps again. A kick never undoes the engine's own read
// deadline. The spin is long (10 s), so that each awaited answer is
// caught by it on any machine; none is due that long.
func TestSockAwaitAnswer(t *testing.T) {
	c, peer := tcpPair(t)
	s, err := newSock(c, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.awaitedOnly = true
	var caught atomic.Uint64
	s.caught = &caught
	buf := make([]byte, 16)
	type result struct {
		n   int
		err error
	}
	read := func() <-chan result {
		r := make(chan result, 1)
		go func() {
			n, err := s.readv([][]byte{buf}, true)
			r <- result{n, err}
		}()
		return r
	}
	parked := func() {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); !s.aw.Parked(); {
			if time.Now().After(deadline) {
				t.Fatal("the receiver never waited in the poller")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond) // into the poller's wait
	}
	get := func(r <-chan result, want string, wantCaught uint64) {
		t.Helper()
		select {
		case got := <-r:
			if got.err != nil || string(buf[:got.n]) != want {
				t.Fatalf("read %q, %v; want %q", buf[:got.n], got.err, want)
			}
		case <-time.After(testTimeout):
			t.Fatalf("no %q", want)
		}
		if n := caught.Load(); n != wantCaught {
			t.Fatalf("after %q: %d messages caught by a spin, want %d", want, n, wantCaught)
		}
	}
	later := func(b string) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			peer.Write([]byte(b))
		}()
	}

	// Not awaited: from the poller.
	r := read()
	parked()
	later("a")
	get(r, "a", 0)

	// Awaited while asleep: the kick wakes it to spin.
	r = read()
	parked()
	if err := s.writev([][]byte{[]byte("q")}); err != nil {
		t.Fatal(err)
	}
	s.awaitAnswer()
	later("b")
	get(r, "b", 1)

	// The answer taken, it sleeps again, and the kick's deadline is gone.
	r = read()
	parked()
	later("c")
	get(r, "c", 1)

	// Awaited before it waits: it spins first.
	s.awaitAnswer()
	later("d")
	get(read(), "d", 2)

	// The engine's deadline stands: a kick neither moves nor clears it.
	s.setReadDeadline(time.Now().Add(50 * time.Millisecond))
	r = read()
	parked()
	s.awaitAnswer()
	select {
	case got := <-r:
		if !errors.Is(got.err, os.ErrDeadlineExceeded) {
			t.Fatalf("under the engine's deadline: %d octets, %v; want its timeout", got.n, got.err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the engine's deadline never fired")
	}
}
