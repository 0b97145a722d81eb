package transport_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
)

// TestSendWithInvalidate: an initiator that accepts Send with Invalidate
// finds the STag it advertised for a READ invalidated by the response
// (RFC 7145 section 7.3.5); one that does not, keeps it.
func TestSendWithInvalidate(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{1 << 20}})
	copy(r.luns[0].Store().Mapping().Bytes(), "the first block")
	for _, allow := range []bool{true, false} {
		p := newRawPeer(t, r.dev)
		p.dial(r.addr, allow)
		res := p.login()
		m := p.c.ExtraMR().Mapping()
		mr, err := r.dev.Register(p.c.PD, m, 0, 4096, mem.LocalWrite|mem.RemoteWrite|mem.RemoteInvalidate)
		if err != nil {
			t.Fatal(err)
		}
		p.sendRaw(iser.HeaderFields{ReadValid: true, ReadSTag: uint32(mr.STag()), ReadBaseOffset: mr.BaseTO()},
			scsiCmd(1, res.CmdSN, read16(0, 1), 512, true, false))
		resp, _ := iscsi.AsSCSIResponse(p.expect(iscsi.OpSCSIResponse))
		if resp.Status() != 0 || !bytes.HasPrefix(mr.Bytes(), []byte("the first block")) {
			t.Fatalf("READ: status %#x, data %q", resp.Status(), mr.Bytes()[:16])
		}
		if mr.Valid() == allow {
			t.Errorf("initiator allows Send with Invalidate: %v; STag still valid after the response: %v", allow, mr.Valid())
		}
		r.dev.Deregister(context.Background(), mr)
	}
}

// TestHello: an iSER Hello before login gets a HelloReply (RFC 7145
// section 9.3), and login proceeds.
func TestHello(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{})
	p := newRawPeer(t, r.dev)
	p.dial(r.addr, false)
	p.slot = (p.slot + 1) % p.c.SendSlots()
	buf := p.c.SendBuf(p.slot)
	n, _ := iser.HelloFields{MaxVer: iser.Version, MinVer: iser.Version, IRD: 16}.Encode(buf)
	if err := p.c.PostPDU(p.slot, n, 0); err != nil {
		t.Fatal(err)
	}
	hr, err := iser.ParseHelloReply(p.recv())
	if err != nil {
		t.Fatal(err)
	}
	if hr.Reject() || hr.CurVer() != iser.Version {
		t.Fatalf("HelloReply: reject %v version %d", hr.Reject(), hr.CurVer())
	}
	p.login()
}

// TestCommandWindow: 64 concurrent commands against a target whose queue
// depth is 4 all complete, so the initiator kept to MaxCmdSN (a command
// outside the window would be rejected).
func TestCommandWindow(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{4 << 20}, cfg: target.Config{QueueDepth: 4}})
	s := r.dial(t, initiator.Config{TargetName: targetName, QueueDepth: 64})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- pattern(s, uint64(i*16), 8192, int64(i))
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbortOnCancel: a command whose context ends is aborted with ABORT
// TASK before Do returns, and the session goes on.
func TestAbortOnCancel(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	buf, _ := s.Alloc(8 << 20)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*50*time.Microsecond)
		err := s.Do(ctx, &initiator.Command{CDB: write16(0, uint32(len(buf)/512)), Dir: initiator.DataOut, Data: buf})
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do: %v", err)
		}
	}
	if err := pattern(s, 0, 4096, 1); err != nil {
		t.Fatalf("after the aborts: %v", err)
	}
}

// TestInitiatorNopTimeout: an initiator whose target stops answering
// declares the session dead after NopInterval + NopTimeout.
func TestInitiatorNopTimeout(t *testing.T) {
	checkGoroutines(t)
	dev := iwarp.NewDevice(0)
	defer dev.Close()
	ln, err := dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go silentTarget(newRawPeer(t, dev), ln, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, dev, "tcp", ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, NopInterval: 100 * time.Millisecond, NopTimeout: 300 * time.Millisecond, Log: quietLog(), Buffers: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-s.Done():
		if s.Err() == nil {
			t.Fatal("session ended without a reason")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("initiator did not notice its silent target")
	}
}

// TestInitiatorNopTimeoutBusy: a target that goes silent while a command
// is outstanding (alive at TCP level, as a stopped process is) is still
// pinged and declared lost after NopInterval + NopTimeout; the session then
// tries to recover as for any lost connection, and the command fails once
// RecoveryTimeout has passed without a target.
func TestInitiatorNopTimeoutBusy(t *testing.T) {
	checkGoroutines(t)
	dev := iwarp.NewDevice(0)
	defer dev.Close()
	ln, err := dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	go silentTarget(newRawPeer(t, dev), ln, true)
	obs := &lossObserver{lost: make(chan time.Time, 4)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, dev, "tcp", ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, NopInterval: 100 * time.Millisecond, NopTimeout: 300 * time.Millisecond,
		RecoveryTimeout: time.Second, Observer: obs, Log: quietLog(), Buffers: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, _ := s.Alloc(4096)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- s.Do(context.Background(), &initiator.Command{CDB: read16(0, 8), Dir: initiator.DataIn, Data: buf})
	}()
	select {
	case at := <-obs.lost:
		// The keepalive runs on the one-second tick: interval, timeout
		// and two ticks at most.
		if d := at.Sub(start); d > 2500*time.Millisecond {
			t.Fatalf("silent target noticed after %v with a command outstanding", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("initiator did not notice its silent target while a command was outstanding")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the unanswered command succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not fail after the recovery timeout")
	}
}

// silentTarget accepts one connection on ln with p, runs the login, and
// then never answers anything again, commands and pings alike, while its
// connection stays up. With closeListener, reconnections find nobody.
func silentTarget(p *rawPeer, ln *iwarp.Listener, closeListener bool) {
	req, err := ln.Accept(context.Background())
	if err != nil {
		return
	}
	if closeListener {
		ln.Close()
	}
	var pd [iser.CMHeaderLen]byte
	if req.Accept(p.c.QP, pd[:]) != nil {
		return
	}
	p.run()
	lt := login.NewTarget(&login.TargetConfig{
		Lookup: func(string) *login.TargetPolicy { return &login.TargetPolicy{Name: targetName} },
		Offer:  login.Defaults()})
	for {
		m := <-p.rx
		out, done, err := lt.Step(nil, m[iser.HeaderLen:])
		if err != nil {
			return
		}
		p.sendRaw(iser.HeaderFields{}, out)
		if done {
			return
		}
	}
}

type lossObserver struct{ lost chan time.Time }

func (o *lossObserver) Command(initiator.CommandInfo) {}
func (o *lossObserver) ConnectionLost()               { o.lost <- time.Now() }
func (o *lossObserver) Reconnected()                  {}

// TestSeveralTargets: two targets of one server and a second server in the
// same process keep their data apart (gotgt is used without its global
// target service).
func TestSeveralTargets(t *testing.T) {
	checkGoroutines(t)
	dev := iwarp.NewDevice(0)
	defer dev.Close()
	names := []string{"iqn.2026-11.io.ddpstore:a", "iqn.2026-11.io.ddpstore:b", "iqn.2026-11.io.ddpstore:c"}
	var exports [2][]target.Export
	for i, name := range names {
		st, err := blockdev.NewMemory(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		l, err := lu.New(uint64(i+1), st)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := lu.NewTarget(name, map[uint16]*lu.LU{0: l})
		if err != nil {
			t.Fatal(err)
		}
		srv := min(i, 1) // a and b on the first server, c on the second
		exports[srv] = append(exports[srv], target.Export{Target: tg})
	}
	var addrs []string
	for _, ex := range exports {
		ln, err := dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := target.NewServer(dev, target.Config{Exports: ex, Log: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		defer func() { srv.Close(); <-done }()
		addrs = append(addrs, ln.Addr().String())
	}
	var sessions []*initiator.Session
	for i, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := initiator.Dial(ctx, dev, "tcp", addrs[min(i, 1)], initiator.Config{InitiatorName: initiatorName,
			TargetName: name, Log: quietLog(), Buffers: 1 << 20})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sessions = append(sessions, s)
		buf, _ := s.Alloc(512)
		copy(buf, name)
		do(t, s, &initiator.Command{CDB: write16(0, 1), Dir: initiator.DataOut, Data: buf})
		s.Free(buf)
	}
	for i, s := range sessions {
		buf, _ := s.Alloc(512)
		do(t, s, &initiator.Command{CDB: read16(0, 1), Dir: initiator.DataIn, Data: buf})
		if !bytes.HasPrefix(buf, []byte(names[i])) {
			t.Errorf("target %s reads back %q", names[i], buf[:32])
		}
		s.Free(buf)
	}
}

// TestReloadExports: a LUN added and then removed by SetExports while I/O
// runs on another LUN of the same session; then an ACL change that
// excludes the initiator drops its session.
func TestReloadExports(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{4 << 20, 1 << 20}})
	lun0 := map[uint16]*lu.LU{0: r.luns[0]}
	both := map[uint16]*lu.LU{0: r.luns[0], 1: r.luns[1]}
	setLUNs := func(luns map[uint16]*lu.LU, initiators []string) {
		tg, err := lu.NewTarget(targetName, luns)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.srv.SetExports([]target.Export{{Target: tg, Initiators: initiators}}); err != nil {
			t.Fatal(err)
		}
	}
	setLUNs(lun0, nil)
	s := r.dial(t, initiator.Config{TargetName: targetName})
	stop := make(chan struct{})
	ioErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				ioErr <- nil
				return
			default:
			}
			if err := pattern(s, 0, 16<<10, int64(i)); err != nil {
				ioErr <- err
				return
			}
		}
	}()
	buf, _ := s.Alloc(512)
	defer s.Free(buf)
	// waitLUN waits until TEST UNIT READY to LUN 1 gives want (GOOD or
	// CHECK CONDITION).
	waitLUN := func(want uint8) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			cmd := &initiator.Command{LUN: 1, CDB: make([]byte, 6)}
			if err := s.Do(context.Background(), cmd); err != nil {
				t.Fatal(err)
			}
			if cmd.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("LUN 1 still answers status %#x", cmd.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setLUNs(both, nil)
	waitLUN(0)
	do(t, s, &initiator.Command{LUN: 1, CDB: read16(0, 1), Dir: initiator.DataIn, Data: buf})
	setLUNs(lun0, nil)
	waitLUN(0x02)
	close(stop)
	if err := <-ioErr; err != nil {
		t.Fatalf("I/O on LUN 0 during the reloads: %v", err)
	}
	// Now only another initiator may log in: this session is dropped.
	setLUNs(lun0, []string{"iqn.2026-11.io.ddpstore:someone-else"})
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session of an initiator no longer allowed was not dropped")
	}
}

// TestShutdown: Shutdown lets a session's commands finish, then closes its
// connection gracefully.
func TestShutdown(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{4 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	if err := pattern(s, 0, 64<<10, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session still up after Shutdown")
	}
	if n := r.srv.Sessions(); n != 0 {
		t.Fatalf("%d sessions after Shutdown", n)
	}
}

// TestMaxSessions: a connection beyond MaxSessions is refused; the others
// are untouched.
func TestMaxSessions(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{cfg: target.Config{MaxSessions: 2}})
	a := r.dial(t, initiator.Config{TargetName: targetName})
	r.dial(t, initiator.Config{TargetName: targetName})
	if s, err := r.tryDial(initiator.Config{TargetName: targetName}); err == nil {
		s.Close()
		t.Fatal("a third session was accepted with MaxSessions 2")
	}
	if err := pattern(a, 0, 4096, 1); err != nil {
		t.Fatal(err)
	}
}
