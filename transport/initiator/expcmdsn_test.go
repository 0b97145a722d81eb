package initiator_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// loginSNProxy sits between an initiator and an iSCSI/TCP target and
// rewrites every Login Response as tgt 1.0.85's iSER driver words it:
// ExpCmdSN the login's CmdSN plus ahead, MaxCmdSN the login's CmdSN.
// Everything else passes unchanged. Digests must be off.
func loginSNProxy(t *testing.T, to string, ahead uint32) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	down := func(w io.Writer, r io.Reader) {
		hdr := make([]byte, 48)
		for {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return
			}
			ahs := int(hdr[4]) * 4
			dsl := int(hdr[5])<<16 | int(hdr[6])<<8 | int(hdr[7])
			rest := make([]byte, ahs+(dsl+3)&^3)
			if _, err := io.ReadFull(r, rest); err != nil {
				return
			}
			if hdr[0]&0x3f == 0x23 { // Login Response
				exp := binary.BigEndian.Uint32(hdr[28:])
				binary.BigEndian.PutUint32(hdr[28:], exp+ahead)
				binary.BigEndian.PutUint32(hdr[32:], exp)
			}
			if _, err := w.Write(append(hdr[:48:48], rest...)); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer wg.Done(); down(c, u); c.Close() }()
		}
	}()
	return l.Addr().String()
}

// TestLoginExpCmdSNOnePast: a Final-Response whose ExpCmdSN is one past
// the leading login's CmdSN (tgt's iSER; RFC 7143 section 11.12.8 says it
// must be the CmdSN itself) is taken, and the session's first command
// carries the login's CmdSN: ddptarget, which expects exactly that and
// silently ignores any other (section 4.2.2.1), answers every command.
// Two past fails the login.
func TestLoginExpCmdSNOnePast(t *testing.T) {
	target := tcpTarget(t)
	cfg := quietConfig()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, loginSNProxy(t, target, 1), cfg)
	if err != nil {
		t.Fatalf("login with ExpCmdSN one past the CmdSN: %v", err)
	}
	defer s.Close()
	buf, err := s.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	// The window the login opened is one command (MaxCmdSN = the CmdSN);
	// the answers open the rest. A command sent with another CmdSN than
	// the target expects would get no answer before the deadline.
	cmdCtx, cmdCancel := context.WithTimeout(ctx, 5*time.Second)
	defer cmdCancel()
	write16 := []byte{0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 8, 0, 0}
	read16 := append([]byte{0x88}, write16[1:]...)
	got, _ := s.Alloc(4096)
	for i := range 4 {
		w := &initiator.Command{CDB: write16, Dir: initiator.DataOut, Data: buf}
		r := &initiator.Command{CDB: read16, Dir: initiator.DataIn, Data: got}
		if err := s.Do(cmdCtx, w); err != nil || w.Status != 0 {
			t.Fatalf("WRITE %d: %v, status %#x", i, err, w.Status)
		}
		if err := s.Do(cmdCtx, r); err != nil || r.Status != 0 {
			t.Fatalf("READ %d: %v, status %#x", i, err, r.Status)
		}
		if !bytes.Equal(got, buf) {
			t.Fatalf("READ %d: not what was written", i)
		}
	}

	_, err = initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, loginSNProxy(t, target, 2), cfg)
	if err == nil || !strings.Contains(err.Error(), "ExpCmdSN") {
		t.Fatalf("login with ExpCmdSN two past the CmdSN: %v, want the login refused", err)
	}
}
