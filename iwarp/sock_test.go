package iwarp

import (
	"net"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/spin"
)

// TestSockTurnaround: a readv that polls times the peer's answer to this
// end's last write (spin.Turnaround), and only that: a message with no
// write of this end before it is no sample. The answers here come later
// than the bound, so each sample is exactly the clamp, whatever the
// machine's speed, and the spin stays at the base.
func TestSockTurnaround(t *testing.T) {
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
	defer c.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	const base = 100 * time.Microsecond
	s, err := newSock(c.(*net.TCPConn), base)
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
