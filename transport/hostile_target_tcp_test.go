package transport_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
)

// The hostile-target suite over iSCSI/TCP (RFC 7143 without iSER): there
// the initiator reads Data-In straight into the caller's buffer and
// answers R2Ts from it, so what it must refuse is data outside a command,
// out of order, after its end, and a status that promises more data than
// came.

// tcpFake is a fake iSCSI/TCP target: a listener whose connections the
// test drives PDU by PDU.
type tcpFake struct {
	ln    net.Listener
	conns chan *tcpFakeConn
	wg    sync.WaitGroup
	mu    sync.Mutex
	all   []*tcpFakeConn
}

type tcpFakeConn struct {
	nc     net.Conn
	statSN uint32
}

func newTCPFake(t *testing.T) *tcpFake {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFake{ln: ln, conns: make(chan *tcpFakeConn, 4)}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c := &tcpFakeConn{nc: nc}
			f.mu.Lock()
			f.all = append(f.all, c)
			f.mu.Unlock()
			f.conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
		f.mu.Lock()
		for _, c := range f.all {
			c.nc.Close()
		}
		f.mu.Unlock()
	})
	return f
}

// read returns the next PDU's BHS and data segment (unpadded).
func (c *tcpFakeConn) read() (iscsi.BHS, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, iscsi.BHSLen)
	if _, err := io.ReadFull(c.nc, b); err != nil {
		return nil, nil, err
	}
	bhs := iscsi.BHS(b)
	n := int(bhs.DataSegmentLength())
	data := make([]byte, (n+3)&^3)
	if _, err := io.ReadFull(c.nc, data); err != nil {
		return nil, nil, err
	}
	return bhs, data[:n], nil
}

// readCmd returns the next PDU that is not a NOP-Out.
func (c *tcpFakeConn) readCmd(t *testing.T) iscsi.BHS {
	t.Helper()
	for {
		b, _, err := c.read()
		if err != nil {
			t.Fatalf("reading from the initiator: %v", err)
		}
		if b.Opcode() != iscsi.OpNOPOut {
			return b
		}
	}
}

func (c *tcpFakeConn) write(p []byte) error {
	for len(p)%4 != 0 {
		p = append(p, 0)
	}
	_, err := c.nc.Write(p)
	return err
}

func (c *tcpFakeConn) login(t *testing.T) {
	t.Helper()
	lt := login.NewTarget(&login.TargetConfig{Traditional: true,
		Lookup: func(string) *login.TargetPolicy { return &login.TargetPolicy{Name: targetName} },
		Offer:  login.Defaults(), NewTSIH: func() uint16 { return 3 }})
	for {
		b, data, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := lt.Step(nil, append(append([]byte(nil), b...), data...))
		if err != nil {
			t.Fatal(err)
		}
		c.write(append([]byte(nil), out...))
		if done {
			c.statSN = lt.Result().StatSN
			return
		}
	}
}

// answer is fakeConn.answer for TCP.
func (c *tcpFakeConn) answer(op iscsi.Opcode, cmd iscsi.BHS, fill func(b iscsi.BHS), data []byte) []byte {
	return pdu(op, func(b iscsi.BHS) {
		b.SetITT(cmd.ITT())
		sn := iscsi.TargetSNs{BHS: b}
		sn.SetStatSN(c.statSN)
		cmdSN := iscsi.InitiatorSNs{BHS: cmd}.CmdSN()
		sn.SetExpCmdSN(cmdSN + 1)
		sn.SetMaxCmdSN(cmdSN + 64)
		if fill != nil {
			fill(b)
		}
	}, data)
}

// dataIn sends n octets of data at off for cmd; status, when set, rides
// on it (with residual under when positive).
func (c *tcpFakeConn) dataIn(cmd iscsi.BHS, off int, data []byte, status bool, under uint32) error {
	return c.write(c.answer(iscsi.OpSCSIDataIn, cmd, func(b iscsi.BHS) {
		d, _ := iscsi.AsSCSIDataIn(b)
		d.SetBufferOffset(uint32(off))
		d.SetTTT(iscsi.ReservedITT)
		b.SetFinal(status)
		if status {
			d.SetHasStatus(true)
			c.statSN++
			if under > 0 {
				d.SetUnderflow(true)
				d.SetResidualCount(under)
			}
		} else {
			iscsi.TargetSNs{BHS: b}.SetStatSN(0)
		}
	}, data))
}

func (c *tcpFakeConn) respond(cmd iscsi.BHS) error {
	c.statSN++
	return c.write(c.answer(iscsi.OpSCSIResponse, cmd, nil, nil))
}

// connLost reports whether the initiator closed the connection within d.
func (c *tcpFakeConn) connLost(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		if _, err := c.nc.Read(b[:]); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func TestHostileTargetTCP(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	good := r.dial(t, initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:good"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var goodErr error
	var goodFailed atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if goodErr = pattern(good, 8192, 64<<10, int64(i)); goodErr != nil {
				goodFailed.Store(true)
				return
			}
		}
	}()
	half := hostileN / 2
	cases := []struct {
		name string
		cfg  func(*initiator.Config)
		run  func(t *testing.T, c *tcpFakeConn, s *initiator.Session)
	}{
		{"read/well-behaved-two-data-ins", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			d := hostilePattern(hostileN, 0x21)
			c.dataIn(cmd, 0, d[:half], false, 0)
			c.dataIn(cmd, half, d[half:], true, 0)
			copy(x.legit, d)
			succeeds(t, x)
		}},
		{"read/honest-underflow", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			d := hostilePattern(half, 0x22)
			c.dataIn(cmd, 0, d, true, uint32(half))
			copy(x.legit, d)
			succeeds(t, x)
		}},
		{"read/data-in-past-the-commands-length", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, half, hostilePattern(hostileN, 1), true, 0)
			tcpFails(t, x, c)
		}},
		{"read/data-in-for-an-unknown-itt", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			bogus := append(iscsi.BHS(nil), cmd...)
			bogus.SetITT(cmd.ITT() ^ 0x00050000)
			c.dataIn(bogus, 0, hostilePattern(512, 1), false, 0)
			tcpFails(t, x, c)
		}},
		{"read/data-in-with-a-gap", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 512, hostilePattern(half, 1), false, 0)
			tcpFails(t, x, c)
		}},
		{"read/data-in-repeated", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 0, hostilePattern(half, 1), false, 0)
			c.dataIn(cmd, 0, hostilePattern(half, 2), false, 0)
			tcpFails(t, x, c)
		}},
		{"read/good-response-with-half-the-data", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 0, hostilePattern(half, 1), false, 0)
			c.respond(cmd) // GOOD, no residual: claims hostileN octets
			tcpFails(t, x, c)
		}},
		{"read/good-status-in-data-in-with-half-the-data", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 0, hostilePattern(half, 1), true, 0)
			tcpFails(t, x, c)
		}},
		{"read/residual-claiming-less-data-than-sent", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 0, hostilePattern(hostileN, 1), true, uint32(half))
			tcpFails(t, x, c)
		}},
		{"read/data-in-after-the-status", nil, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataIn, bg())
			cmd := c.readCmd(t)
			d := hostilePattern(hostileN, 0x23)
			c.dataIn(cmd, 0, d, true, 0)
			copy(x.legit, d)
			succeeds(t, x)
			c.dataIn(cmd, 0, hostilePattern(half, 0x77), false, 0)
			if !c.connLost(5 * time.Second) {
				t.Fatal("a Data-In after the command's status kept the connection")
			}
			x.judge(t) // the buffer still holds what the command returned
		}},
		{"read/data-in-for-a-write", func(c *initiator.Config) { c.NoImmediateData = true }, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			cmd := c.readCmd(t)
			c.dataIn(cmd, 0, hostilePattern(512, 1), false, 0)
			tcpFails(t, x, c)
			if !bytes.Equal(x.cmd.Data, x.legit) {
				t.Fatal("a Data-In landed in a write buffer")
			}
		}},
		{"write/r2t-past-the-write-buffer", func(c *initiator.Config) { c.NoImmediateData = true }, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			cmd := c.readCmd(t)
			c.write(c.answer(iscsi.OpR2T, cmd, func(b iscsi.BHS) {
				r, _ := iscsi.AsR2T(b)
				r.SetTTT(1)
				r.SetBufferOffset(uint32(half))
				r.SetDesiredDataTransferLength(hostileN)
			}, nil))
			tcpFails(t, x, c)
		}},
		{"write/well-behaved-r2t", func(c *initiator.Config) { c.NoImmediateData = true }, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			cmd := c.readCmd(t)
			c.write(c.answer(iscsi.OpR2T, cmd, func(b iscsi.BHS) {
				r, _ := iscsi.AsR2T(b)
				r.SetTTT(1)
				r.SetDesiredDataTransferLength(hostileN)
			}, nil))
			var got []byte
			for len(got) < hostileN {
				b, data, err := c.read()
				if err != nil || b.Opcode() != iscsi.OpSCSIDataOut {
					t.Fatalf("Data-Out: %v %v", b, err)
				}
				got = append(got, data...)
			}
			if !bytes.Equal(got, x.legit) {
				t.Fatal("Data-Out differs from the write buffer")
			}
			c.respond(cmd)
			succeeds(t, x)
		}},
		{"read/never-answered", func(c *initiator.Config) { c.NopTimeout = 500 * time.Millisecond }, func(t *testing.T, c *tcpFakeConn, s *initiator.Session) {
			ctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
			defer cancel()
			x := startIO(t, s, initiator.DataIn, ctx)
			cmd := c.readCmd(t)
			if err := x.wait(t, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("unanswered command: %v", err)
			}
			c.dataIn(cmd, 0, hostilePattern(hostileN, 6), true, 0)
			x.judge(t)
			for _, b := range x.cmd.Data {
				if b != preOctet {
					t.Fatal("the unanswered command's buffer changed after Do returned")
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTCPFake(t)
			cfg := initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:victim",
				NopInterval: -1, Log: quietLog(), Buffers: 1 << 20, LoginTimeout: 2 * time.Second, NopTimeout: time.Second}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			res := make(chan error, 1)
			var s *initiator.Session
			go func() {
				ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
				defer cancel()
				var err error
				s, err = initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, f.ln.Addr().String(), cfg)
				res <- err
			}()
			var c *tcpFakeConn
			select {
			case c = <-f.conns:
			case <-time.After(10 * time.Second):
				t.Fatal("no connection")
			}
			c.login(t)
			if err := <-res; err != nil {
				t.Fatal(err)
			}
			defer func() {
				c.nc.Close() // no Logout answer: Close gives up at once
				done := make(chan struct{})
				go func() { s.Close(); close(done) }()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					t.Error("Session.Close hangs")
				}
			}()
			tc.run(t, c, s)
		})
		if goodFailed.Load() {
			break
		}
	}
	close(stop)
	wg.Wait()
	if goodErr != nil {
		t.Fatalf("the well-behaved session failed beside the hostile targets: %v", goodErr)
	}
}

// tcpFails checks that the command failed (not completed, not hung), its
// buffer's guards intact, and the connection dropped.
func tcpFails(t *testing.T, x *hostileIO, c *tcpFakeConn) {
	t.Helper()
	if err := x.wait(t, 10*time.Second); err == nil {
		t.Fatalf("command completed (status %#x) after the target's misbehaviour", x.cmd.Status)
	} else {
		t.Logf("caller's error: %v", err)
	}
	x.judge(t)
	if !c.connLost(5 * time.Second) {
		t.Fatal("the initiator kept the connection")
	}
}
