package transport_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/target"
)

// TestLoginFlood: connections that never log in are bounded, per address
// and in all, on both transports; beyond the bound a connection is closed
// at once; those within it are dropped after the login timeout; sessions
// that logged in go on working throughout, and new ones can log in once
// the flood has been dropped.
func TestLoginFlood(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{tcp: true, cfg: target.Config{MaxLoggingIn: 6, MaxLoggingInPerPeer: 4,
		LoginTimeout: 1500 * time.Millisecond, Log: quietLog()}})
	good := r.dial(t, initiator.Config{TargetName: targetName})

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", r.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitSessions(t, r, 1+4)

	// A fifth from this address: closed at once.
	if err := refusedFrom("127.0.0.1", r.tcpAddr); err != nil {
		t.Fatalf("a connection beyond the per-address limit: %v", err)
	}
	// Two more from another address fit the total of 6; a third from a
	// third address does not.
	for _, src := range []string{"127.0.0.2", "127.0.0.2"} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", r.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitSessions(t, r, 1+6)
	if err := refusedFrom("127.0.0.3", r.tcpAddr); err != nil {
		t.Fatalf("a connection beyond the total limit: %v", err)
	}
	// And over iSER: the MPA exchange is answered with a Reject.
	qp := newRawPeer(t, r.dev)
	var pd [iser.CMHeaderLen]byte
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := qp.c.QP.Connect(ctx, "tcp", r.addr, iwarp.ConnConfig{PrivateData: pd[:]}); err == nil {
		t.Fatal("an iSER connection beyond the per-address limit was accepted")
	}
	cancel()

	if err := pattern(good, 0, 64<<10, 1); err != nil {
		t.Fatalf("the logged-in session during the flood: %v", err)
	}

	// The ones that never logged in are dropped after the login timeout.
	for _, c := range idle {
		if err := closedWithin(c, 4*time.Second); err != nil {
			t.Fatalf("a connection that never logged in: %v", err)
		}
	}
	waitSessions(t, r, 1)
	s := r.dialTCP(t, initiator.Config{TargetName: targetName})
	if err := pattern(s, 1024, 64<<10, 2); err != nil {
		t.Fatalf("a new session after the flood: %v", err)
	}
	if err := pattern(good, 0, 4096, 3); err != nil {
		t.Fatalf("the first session after the flood: %v", err)
	}
}

// refusedFrom dials addr from src and reports nil when the server closes
// the connection at once (its reset may even beat connect's return).
func refusedFrom(src, addr string) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		return err
	}
	defer c.Close()
	return closedWithin(c, time.Second)
}

// closedWithin reports nil when the peer closes c within d.
func closedWithin(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return err
			}
			return nil
		}
	}
}

// waitSessions waits until the server serves n connections.
func waitSessions(t *testing.T, r *rig, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.srv.Sessions() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections served, want %d", r.srv.Sessions(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
