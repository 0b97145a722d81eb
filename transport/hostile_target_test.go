package transport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/login"
)

// The hostile-target suite: fake iSER targets, each on an RNIC of its own,
// driven PDU by PDU and RDMA operation by RDMA operation over the verbs
// API, misbehave in every way listed in the cases below, against our
// initiator on the RNIC that a well-behaved session (to a real target)
// shares and keeps doing verified I/O on. For every case the initiator
// must not panic or hang, must not complete a command with data other
// than what the target legitimately placed (known patterns, guard octets
// around each buffer), and must give its caller a clear error or recover
// by reconnecting.

const (
	fakeSlots   = 16
	fakeSlotLen = iser.HeaderLen + iscsi.BHSLen + 8192 + 1024
	fakeData    = 1 << 20
	hostileN    = 8192 // the commands' data length
)

// fakeTarget is a listener on its own RNIC; its connections are fakeConns.
type fakeTarget struct {
	t     *testing.T
	dev   *iwarp.Device
	ln    *iwarp.Listener
	addr  string
	conns chan *fakeConn
	// recvs is how many receives a new connection posts (fakeSlots
	// unless a case starves the initiator's first Sends).
	recvs atomic.Int32
	wg    sync.WaitGroup
	mu    sync.Mutex
	all   []*fakeConn
}

func newFakeTarget(t *testing.T) *fakeTarget {
	t.Helper()
	ft := &fakeTarget{t: t, dev: iwarp.NewDevice(0), conns: make(chan *fakeConn, 8)}
	ft.recvs.Store(fakeSlots)
	ln, err := ft.dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ft.ln, ft.addr = ln, ln.Addr().String()
	ft.wg.Add(1)
	go ft.accept()
	t.Cleanup(ft.close)
	return ft
}

func (ft *fakeTarget) accept() {
	defer ft.wg.Done()
	for {
		req, err := ft.ln.Accept(context.Background())
		if err != nil {
			return
		}
		fc, err := newFakeConn(ft.dev, int(ft.recvs.Load()))
		if err != nil {
			ft.t.Error(err)
			req.Reject(nil)
			return
		}
		fc.cm, _ = iser.ParseCMHeader(req.PrivateData())
		var pd [iser.CMHeaderLen]byte
		iser.CMFields{}.Encode(pd[:])
		if err := req.Accept(fc.qp, pd[:]); err != nil {
			fc.close()
			continue
		}
		ft.mu.Lock()
		ft.all = append(ft.all, fc)
		ft.mu.Unlock()
		fc.start()
		ft.conns <- fc
	}
}

// conn returns the next accepted connection.
func (ft *fakeTarget) conn() *fakeConn {
	ft.t.Helper()
	select {
	case fc := <-ft.conns:
		return fc
	case <-time.After(10 * time.Second):
		ft.t.Fatal("no connection to the fake target")
		return nil
	}
}

func (ft *fakeTarget) close() {
	ft.ln.Close()
	ft.wg.Wait()
	ft.mu.Lock()
	for _, fc := range ft.all {
		fc.close()
	}
	ft.mu.Unlock()
	ft.dev.Close()
}

// fakeConn is one connection of a fake target: a QP with receive slots it
// reposts only while repost is set, send slots, and a data region that its
// RDMA Writes come from and its RDMA Reads land in.
type fakeConn struct {
	dev    *iwarp.Device
	pd     mem.PD
	cq     *iwarp.CQ
	qp     *iwarp.QP
	m      *mem.Mapping
	mr     *mem.MR
	cm     iser.CMHeader // the initiator's iSER CM private data
	repost atomic.Bool
	rx     chan []byte
	ops    chan iwarp.WC // completions of RDMA Writes and Reads
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	slot   int
	nextID uint64
	statSN uint32
	lt     *login.Target
}

// The fake's mapping: receive slots, then send slots (as many as its send
// queue holds, so that no Send's buffer is reused before it went out),
// then the data region.
const (
	fakeTxSlots = 256
	fakeTxOff   = fakeSlots * fakeSlotLen
	fakeDataOff = fakeTxOff + fakeTxSlots*fakeSlotLen
)

func newFakeConn(dev *iwarp.Device, recvs int) (*fakeConn, error) {
	fc := &fakeConn{dev: dev, pd: dev.AllocPD(), rx: make(chan []byte, 4096), ops: make(chan iwarp.WC, 64),
		stop: make(chan struct{}), done: make(chan struct{}), nextID: 1000}
	var err error
	if fc.cq, err = dev.NewCQ(8192); err != nil {
		return nil, err
	}
	if fc.qp, err = dev.NewQP(iwarp.QPConfig{PD: fc.pd, SendCQ: fc.cq, RecvCQ: fc.cq, MaxSendWR: fakeTxSlots, MaxRecvWR: fakeSlots}); err != nil {
		return nil, err
	}
	if fc.m, err = mem.Anonymous(fakeDataOff + fakeData); err != nil {
		return nil, err
	}
	if fc.mr, err = dev.Register(fc.pd, fc.m, 0, fc.m.Len(), mem.LocalWrite|mem.RemoteWrite|mem.RemoteRead); err != nil {
		return nil, err
	}
	fc.repost.Store(true)
	for i := range recvs {
		if err := fc.postRecv(i); err != nil {
			return nil, err
		}
	}
	return fc, nil
}

func (fc *fakeConn) postRecv(slot int) error {
	return fc.qp.PostRecv(&iwarp.RecvWR{ID: uint64(slot), SGL: []iwarp.SGE{iwarp.SGEOf(fc.mr, slot*fakeSlotLen, fakeSlotLen)}})
}

// start polls completions: received messages go to rx (and their slots
// are reposted while repost is set), RDMA operations' to ops.
func (fc *fakeConn) start() {
	go func() {
		defer close(fc.done)
		var wcs [16]iwarp.WC
		for {
			n := fc.cq.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				switch {
				case wc.Op == iwarp.WCRecv && wc.Status == iwarp.StatusSuccess:
					off := int(wc.WRID) * fakeSlotLen
					select {
					case fc.rx <- append([]byte(nil), fc.m.Bytes()[off:off+int(wc.ByteLen)]...):
					default:
					}
					if fc.repost.Load() {
						fc.postRecv(int(wc.WRID))
					}
				case wc.WRID >= 1000:
					select {
					case fc.ops <- wc:
					default:
					}
				}
			}
			if n > 0 {
				continue
			}
			fc.cq.Arm(false)
			if fc.cq.Poll(wcs[:0]) > 0 {
				continue
			}
			select {
			case <-fc.cq.Notify():
			case <-fc.qp.Done():
				for fc.cq.Poll(wcs[:]) > 0 {
				}
				return
			case <-fc.stop:
				return
			}
		}
	}()
}

func (fc *fakeConn) close() {
	fc.once.Do(func() {
		fc.qp.Close()
		close(fc.stop)
		<-fc.done
		fc.dev.Deregister(context.Background(), fc.mr)
		fc.m.Close()
		fc.cq.Close()
	})
}

// recv returns the next message the initiator sent (iSER header first),
// or nil after d.
func (fc *fakeConn) recv(d time.Duration) []byte {
	select {
	case m := <-fc.rx:
		return m
	case <-time.After(d):
		return nil
	}
}

// recvPDU returns the next PDU that is not a NOP-Out, with its iSER header.
func (fc *fakeConn) recvPDU(t *testing.T) (iser.Header, iscsi.BHS) {
	t.Helper()
	for {
		m := fc.recv(5 * time.Second)
		if m == nil {
			t.Fatalf("no PDU from the initiator (QP %v, %v)", fc.qp.State(), fc.qp.Err())
		}
		h, body, err := iser.ParseHeader(m)
		if err != nil {
			t.Fatal(err)
		}
		b := iscsi.BHS(body[:iscsi.BHSLen])
		if b.Opcode() != iscsi.OpNOPOut {
			return h, b
		}
	}
}

// send sends pdu behind an iSER header, with Invalidate of inv unless 0.
func (fc *fakeConn) send(h iser.HeaderFields, pdu []byte, inv mem.STag) error {
	fc.slot = (fc.slot + 1) % fakeTxSlots
	buf := fc.m.Bytes()[fakeTxOff+fc.slot*fakeSlotLen:]
	h.Encode(buf)
	n := copy(buf[iser.HeaderLen:fakeSlotLen], pdu)
	wr := iwarp.SendWR{ID: 1, Op: iwarp.OpSend, SGL: []iwarp.SGE{iwarp.SGEOf(fc.mr, fakeTxOff+fc.slot*fakeSlotLen, iser.HeaderLen+n)}}
	if inv != 0 {
		wr.Op, wr.InvalidateSTag = iwarp.OpSendInv, inv
	}
	return fc.qp.PostSend(&wr)
}

// login answers the login with login.Target; mangle, when set, may change
// the last Login Response (the one that completes the login).
func (fc *fakeConn) login(t *testing.T, mangle func(resp []byte) []byte) {
	t.Helper()
	fc.lt = login.NewTarget(&login.TargetConfig{
		Lookup: func(string) *login.TargetPolicy { return &login.TargetPolicy{Name: targetName} },
		Offer:  login.Defaults(), NewTSIH: func() uint16 { return 9 }})
	for {
		m := fc.recv(5 * time.Second)
		if m == nil {
			t.Fatal("no Login Request")
		}
		out, done, err := fc.lt.Step(nil, m[iser.HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		if done && mangle != nil {
			out = mangle(append([]byte(nil), out...))
		}
		fc.send(iser.HeaderFields{}, out, 0)
		if done {
			fc.statSN = fc.lt.Result().StatSN
			return
		}
	}
}

// answer builds a target PDU of opcode op for the command cmd (its ITT
// and CmdSN), StatSN and window set, with fill and data.
func (fc *fakeConn) answer(op iscsi.Opcode, cmd iscsi.BHS, fill func(b iscsi.BHS), data []byte) []byte {
	return pdu(op, func(b iscsi.BHS) {
		b.SetITT(cmd.ITT())
		sn := iscsi.TargetSNs{BHS: b}
		sn.SetStatSN(fc.statSN)
		fc.statSN++
		cmdSN := iscsi.InitiatorSNs{BHS: cmd}.CmdSN()
		sn.SetExpCmdSN(cmdSN + 1)
		sn.SetMaxCmdSN(cmdSN + 64)
		if fill != nil {
			fill(b)
		}
	}, data)
}

// respond answers cmd with a SCSI Response (GOOD unless fill says else).
func (fc *fakeConn) respond(cmd iscsi.BHS, fill func(r iscsi.SCSIResponse), data []byte, inv mem.STag) error {
	return fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpSCSIResponse, cmd, func(b iscsi.BHS) {
		if fill != nil {
			r, _ := iscsi.AsSCSIResponse(b)
			fill(r)
		}
	}, data), inv)
}

// write RDMA-Writes data to stag at to and returns the Write's status (a
// Write completes locally, so success says nothing of the initiator's
// verdict: see terminated).
func (fc *fakeConn) write(stag uint32, to uint64, data []byte) iwarp.Status {
	copy(fc.m.Bytes()[fakeDataOff:], data)
	fc.nextID++
	err := fc.qp.PostSend(&iwarp.SendWR{ID: fc.nextID, Op: iwarp.OpWrite, SGL: []iwarp.SGE{iwarp.SGEOf(fc.mr, fakeDataOff, len(data))},
		RemoteSTag: mem.STag(stag), RemoteTO: to})
	if err != nil {
		return iwarp.StatusFlushed
	}
	return fc.op()
}

// read RDMA-Reads n octets of stag at to.
func (fc *fakeConn) read(stag uint32, to uint64, n int) (iwarp.Status, []byte) {
	fc.nextID++
	err := fc.qp.PostSend(&iwarp.SendWR{ID: fc.nextID, Op: iwarp.OpRead, SGL: []iwarp.SGE{iwarp.SGEOf(fc.mr, fakeDataOff, n)},
		RemoteSTag: mem.STag(stag), RemoteTO: to})
	if err != nil {
		return iwarp.StatusFlushed, nil
	}
	return fc.op(), fc.m.Bytes()[fakeDataOff : fakeDataOff+n]
}

func (fc *fakeConn) op() iwarp.Status {
	select {
	case wc := <-fc.ops:
		return wc.Status
	case <-time.After(5 * time.Second):
		return iwarp.StatusFlushed
	}
}

// terminated reports whether the connection ended within d with a
// Terminate from the initiator's RNIC.
func (fc *fakeConn) terminated(d time.Duration) bool {
	select {
	case <-fc.qp.Done():
	case <-time.After(d):
		return false
	}
	var te *iwarp.TerminateError
	return errors.As(fc.qp.Err(), &te) && te.Remote
}

// hostileIO is one command of the initiator toward a fake target: its
// buffer lies between two guard runs of hostileN octets each, and is
// pre-filled so that any octet the target did not place is known.
type hostileIO struct {
	s      *initiator.Session
	big    []byte
	cmd    *initiator.Command
	res    chan error
	err    error
	legit  []byte // what the buffer must hold if the command completes GOOD
	waited bool
}

const (
	guardOctet = 0xee
	preOctet   = 0xdd
)

// pattern returns n octets of a pattern that starts at seed.
func hostilePattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

// start issues a READ (dir DataIn) or a WRITE (DataOut, its buffer a
// pattern) of hostileN octets; ctx bounds it.
func startIO(t *testing.T, s *initiator.Session, dir initiator.Direction, ctx context.Context) *hostileIO {
	t.Helper()
	big, err := s.Alloc(3 * hostileN)
	if err != nil {
		t.Fatal(err)
	}
	for i := range big {
		big[i] = guardOctet
	}
	data := big[hostileN : 2*hostileN : 2*hostileN]
	x := &hostileIO{s: s, big: big, res: make(chan error, 1)}
	cdb := read16(0, hostileN/512)
	if dir == initiator.DataOut {
		cdb = write16(0, hostileN/512)
		copy(data, hostilePattern(hostileN, 0x40))
	} else {
		for i := range data {
			data[i] = preOctet
		}
	}
	x.legit = append([]byte(nil), data...)
	x.cmd = &initiator.Command{CDB: cdb, Dir: dir, Data: data}
	go func() { x.res <- s.Do(ctx, x.cmd) }()
	return x
}

// wait returns Do's result (within d, else fails the test).
func (x *hostileIO) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	if x.waited {
		return x.err
	}
	select {
	case x.err = <-x.res:
		x.waited = true
		return x.err
	case <-time.After(d):
		t.Fatalf("Do still waiting after %v", d)
		return nil
	}
}

// judge checks what the caller got: guards untouched, and for a command
// that completed GOOD exactly the legitimate data (up to its residual).
func (x *hostileIO) judge(t *testing.T) {
	t.Helper()
	for i, b := range x.big {
		if (i < hostileN || i >= 2*hostileN) && b != guardOctet {
			t.Fatalf("guard octet %d of the buffer changed to %#x", i-hostileN, b)
		}
	}
	if x.err != nil || x.cmd.Status != 0 {
		return
	}
	valid := hostileN
	if x.cmd.Underflow {
		valid -= int(x.cmd.Residual)
	}
	if !bytes.Equal(x.cmd.Data[:valid], x.legit[:valid]) {
		t.Fatalf("a command completed GOOD with data the target did not legitimately place")
	}
}

// hostileCase is one way a target misbehaves.
type hostileCase struct {
	name string
	// cfg adjusts the initiator's configuration.
	cfg func(*initiator.Config)
	// before runs on the fake target before the initiator dials.
	before func(ft *fakeTarget)
	// run drives the fake target and the initiator; s is nil when the
	// case runs its own Dial (dial set).
	run  func(t *testing.T, ft *fakeTarget, fc *fakeConn, s *initiator.Session)
	dial bool // run dials by itself
}

// hostileDial dials the fake target from the initiator's RNIC dev and
// answers the login; it returns the session and its connection.
func hostileDial(t *testing.T, dev *iwarp.Device, ft *fakeTarget, cfg initiator.Config) (*initiator.Session, *fakeConn) {
	t.Helper()
	res := make(chan error, 1)
	var s *initiator.Session
	go func() {
		var err error
		s, err = dialFake(dev, ft, cfg)
		res <- err
	}()
	fc := ft.conn()
	fc.login(t, nil)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	return s, fc
}

func dialFake(dev *iwarp.Device, ft *fakeTarget, cfg initiator.Config) (*initiator.Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return initiator.Dial(ctx, dev, "tcp", ft.addr, cfg)
}

// closeSoon closes s and fails the test if that hangs; the fake target's
// last connection answers the Logout.
func closeSoon(t *testing.T, s *initiator.Session, ft *fakeTarget) {
	t.Helper()
	done := make(chan struct{})
	ft.mu.Lock()
	fc := ft.all[len(ft.all)-1]
	ft.mu.Unlock()
	go func() {
		for {
			select {
			case m := <-fc.rx:
				_, body, err := iser.ParseHeader(m)
				if err != nil || len(body) < iscsi.BHSLen {
					continue
				}
				if b := iscsi.BHS(body[:iscsi.BHSLen]); b.Opcode() == iscsi.OpLogoutReq {
					fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpLogoutResp, b, nil, nil), 0)
					return
				}
			case <-done:
				return
			case <-fc.done:
				return
			}
		}
	}()
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Session.Close hangs")
	}
}

// fails checks that the command failed with an error (not a hang, not a
// completion) and the initiator's RNIC terminated the fake's connection
// when terminate says so.
func fails(t *testing.T, x *hostileIO, fc *fakeConn, terminate bool) {
	t.Helper()
	if terminate && !fc.terminated(5*time.Second) {
		t.Fatalf("no Terminate from the initiator (QP %v, err %v)", fc.qp.State(), fc.qp.Err())
	}
	if err := x.wait(t, 10*time.Second); err == nil {
		t.Fatalf("command completed (status %#x) after the target's misbehaviour", x.cmd.Status)
	} else {
		t.Logf("caller's error: %v", err)
	}
	x.judge(t)
}

// succeeds checks that the command completed GOOD with the legit data.
func succeeds(t *testing.T, x *hostileIO) {
	t.Helper()
	if err := x.wait(t, 10*time.Second); err != nil || x.cmd.Status != 0 {
		t.Fatalf("command: %v, status %#x", err, x.cmd.Status)
	}
	x.judge(t)
}

// readData is the well-behaved part of a READ: the pattern written at the
// start of the command's STag. It returns the data, which becomes legit.
func readData(t *testing.T, fc *fakeConn, h iser.Header, x *hostileIO, n int) {
	t.Helper()
	data := hostilePattern(n, 0x10)
	if st := fc.write(h.ReadSTag(), h.ReadBaseOffset(), data); st != iwarp.StatusSuccess {
		t.Fatalf("RDMA Write of the read data: %v", st)
	}
	copy(x.legit, data)
}

// expectCommand receives the initiator's next SCSI Command.
func expectCommand(t *testing.T, fc *fakeConn) (iser.Header, iscsi.BHS) {
	t.Helper()
	h, b := fc.recvPDU(t)
	if b.Opcode() != iscsi.OpSCSICommand {
		t.Fatalf("got %v, want a SCSI Command", b.Opcode())
	}
	return append(iser.Header(nil), h...), append(iscsi.BHS(nil), b...)
}

func bg() context.Context { return context.Background() }

func TestHostileTarget(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	// The well-behaved session shares the initiator's RNIC (STag table)
	// with every hostile one.
	good := r.dial(t, initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:good"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var goodErr error
	var goodFailed atomic.Bool
	var goodRuns atomic.Int64
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
			goodRuns.Add(1)
		}
	}()

	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			ft := newFakeTarget(t)
			if c.before != nil {
				c.before(ft)
			}
			cfg := initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:victim",
				NopInterval: -1, Log: quietLog(), Buffers: 1 << 20, LoginTimeout: 2 * time.Second, NopTimeout: time.Second}
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			if c.dial {
				c.run(t, ft, nil, nil)
				return
			}
			s, fc := hostileDial(t, r.dev, ft, cfg)
			defer closeSoon(t, s, ft)
			c.run(t, ft, fc, s)
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
	if goodRuns.Load() == 0 {
		t.Fatal("the well-behaved session did no I/O")
	}
	t.Logf("the well-behaved session did %d verified write+read rounds meanwhile", goodRuns.Load())
}

// sense builds a fixed-format sense data segment (with its length) of n
// octets of sense, declaring decl.
func senseSegment(n, decl int) []byte {
	b := make([]byte, 2+n)
	binary.BigEndian.PutUint16(b, uint16(decl))
	if n > 13 {
		b[2], b[4], b[14] = 0x70, 0x05, 0x24 // ILLEGAL REQUEST, INVALID FIELD IN CDB
	}
	return b
}

func hostileCases() []hostileCase {
	read := func(t *testing.T, s *initiator.Session) *hostileIO { return startIO(t, s, initiator.DataIn, bg()) }
	return []hostileCase{
		{name: "read/well-behaved-with-send-with-invalidate", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			if fc.cm.SendInvNotSupported() {
				t.Fatal("the initiator's CM private data refuses Send with Invalidate")
			}
			var last uint32
			for i := 0; i < 3; i++ {
				x := read(t, s)
				h, cmd := expectCommand(t, fc)
				if !h.ReadValid() || h.WriteValid() || h.ReadSTag() == last {
					t.Fatalf("command %d: read STag %v (%#x, last %#x), write STag %v", i, h.ReadValid(), h.ReadSTag(), last, h.WriteValid())
				}
				last = h.ReadSTag()
				readData(t, fc, h, x, hostileN)
				fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
				succeeds(t, x)
			}
		}},
		{name: "read/well-behaved-plain-send", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, nil, nil, 0)
			succeeds(t, x)
		}},
		{name: "read/outstanding-commands-get-different-stags", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x1 := read(t, s)
			h1, c1 := expectCommand(t, fc)
			x2 := read(t, s)
			h2, c2 := expectCommand(t, fc)
			if h1.ReadSTag() == h2.ReadSTag() || mem.STag(h1.ReadSTag()).Index() == mem.STag(h2.ReadSTag()).Index() {
				t.Fatalf("two outstanding commands share STag index: %#x, %#x", h1.ReadSTag(), h2.ReadSTag())
			}
			// Each command's data goes through its own STag; answered in
			// reverse order.
			d1, d2 := hostilePattern(hostileN, 1), hostilePattern(hostileN, 2)
			fc.write(h2.ReadSTag(), h2.ReadBaseOffset(), d2)
			fc.write(h1.ReadSTag(), h1.ReadBaseOffset(), d1)
			copy(x1.legit, d1)
			copy(x2.legit, d2)
			fc.respond(c2, nil, nil, mem.STag(h2.ReadSTag()))
			fc.respond(c1, nil, nil, mem.STag(h1.ReadSTag()))
			succeeds(t, x1)
			succeeds(t, x2)
		}},
		{name: "read/rdma-write-one-octet-past-the-stag", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, _ := expectCommand(t, fc)
			fc.write(h.ReadSTag(), h.ReadBaseOffset(), hostilePattern(hostileN+1, 3))
			fails(t, x, fc, true)
		}},
		{name: "read/rdma-write-one-octet-before-the-stag", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, _ := expectCommand(t, fc)
			fc.write(h.ReadSTag(), h.ReadBaseOffset()-1, hostilePattern(16, 3))
			fails(t, x, fc, true)
		}},
		{name: "read/rdma-write-into-the-guard-after-the-buffer", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, _ := expectCommand(t, fc)
			fc.write(h.ReadSTag(), h.ReadBaseOffset()+hostileN, hostilePattern(64, 3))
			fails(t, x, fc, true)
		}},
		{name: "read/rdma-write-with-a-guessed-key", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, _ := expectCommand(t, fc)
			fc.write(h.ReadSTag()^0x01, h.ReadBaseOffset(), hostilePattern(64, 3))
			fails(t, x, fc, true)
		}},
		{name: "read/rdma-write-with-the-stag-of-a-finished-command", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x1 := read(t, s)
			h1, c1 := expectCommand(t, fc)
			readData(t, fc, h1, x1, hostileN)
			fc.respond(c1, nil, nil, 0) // no Invalidate: the initiator invalidates
			succeeds(t, x1)
			x2 := read(t, s)
			h2, _ := expectCommand(t, fc)
			// Data for the second command through the first one's STag.
			fc.write(h1.ReadSTag(), h1.ReadBaseOffset(), hostilePattern(hostileN, 9))
			fails(t, x2, fc, true)
			x1.judge(t) // the first command's buffer kept its data
			_ = h2
		}},
		{name: "read/rdma-write-right-after-its-send-with-invalidate", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			// The Invalidate takes effect in the RNIC before the next
			// segment is looked at: the late Write cannot land.
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
			fc.write(h.ReadSTag(), h.ReadBaseOffset(), hostilePattern(hostileN, 0x66))
			if !fc.terminated(5 * time.Second) {
				t.Fatal("a Write after the Send with Invalidate was not terminated")
			}
			if err := x.wait(t, 10*time.Second); err != nil {
				t.Logf("caller's error: %v", err) // the Terminate may beat the completion
			}
			x.judge(t)
		}},
		{name: "read/rdma-write-after-an-abort", cfg: func(c *initiator.Config) { c.NopTimeout = 2 * time.Second }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			ctx, cancel := context.WithCancel(bg())
			x := startIO(t, s, initiator.DataIn, ctx)
			h, _ := expectCommand(t, fc)
			cancel()
			// Answer the ABORT TASK and the fencing ping, then write.
			_, tmf := fc.recvPDU(t)
			if tmf.Opcode() != iscsi.OpTaskMgmtReq {
				t.Fatalf("got %v, want the ABORT TASK", tmf.Opcode())
			}
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpTaskMgmtResp, tmf, nil, nil), 0)
			for {
				m := fc.recv(5 * time.Second)
				if m == nil {
					t.Fatal("no ping after the abort")
				}
				_, body, _ := iser.ParseHeader(m)
				if b := iscsi.BHS(body[:iscsi.BHSLen]); b.Opcode() == iscsi.OpNOPOut {
					fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpNOPIn, b, func(in iscsi.BHS) { in.SetWord(20, iscsi.ReservedITT) }, nil), 0)
					break
				}
			}
			if err := x.wait(t, 10*time.Second); !errors.Is(err, context.Canceled) {
				t.Fatalf("aborted command: %v", err)
			}
			fc.write(h.ReadSTag(), h.ReadBaseOffset(), hostilePattern(hostileN, 5))
			if !fc.terminated(5 * time.Second) {
				t.Fatal("a Write after the abort was not terminated")
			}
			x.judge(t)
			for _, b := range x.cmd.Data {
				if b != preOctet {
					t.Fatal("the aborted command's buffer changed after Do returned")
				}
			}
		}},
		{name: "read/rdma-read-of-the-read-buffer", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, _ := expectCommand(t, fc)
			if st, _ := fc.read(h.ReadSTag(), h.ReadBaseOffset(), 64); st == iwarp.StatusSuccess {
				t.Fatal("the read buffer's STag allowed an RDMA Read")
			}
			fails(t, x, fc, true)
		}},
		{name: "read/send-with-invalidate-of-another-commands-stag", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x1, x2 := read(t, s), read(t, s)
			h1, c1 := expectCommand(t, fc)
			h2, _ := expectCommand(t, fc)
			fc.respond(c1, nil, nil, mem.STag(h2.ReadSTag()))
			_ = h1
			for _, x := range []*hostileIO{x1, x2} {
				if err := x.wait(t, 10*time.Second); err == nil {
					t.Fatal("a command completed after its response invalidated another command's STag")
				}
				x.judge(t)
			}
		}},
		{name: "read/send-with-invalidate-of-an-unknown-stag", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()^0x5a00))
			fails(t, x, fc, true)
		}},
		{name: "read/response-for-an-unknown-itt-first", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			bogus := append(iscsi.BHS(nil), cmd...)
			bogus.SetITT(cmd.ITT() ^ 0x00770000)
			fc.respond(bogus, nil, nil, 0)
			bogus.SetITT(0x1234)
			fc.respond(bogus, nil, nil, 0)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
			succeeds(t, x)
		}},
		{name: "read/response-repeated", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			for i := 0; i < 2; i++ {
				x := read(t, s)
				h, cmd := expectCommand(t, fc)
				readData(t, fc, h, x, hostileN)
				fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
				fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetStatus(0x02) }, senseSegment(18, 18), 0)
				succeeds(t, x)
			}
		}},
		{name: "read/good-without-data", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			// Over iSER an initiator cannot see how much was written:
			// the caller gets its own octets back, none invented.
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.respond(cmd, nil, nil, 0)
			succeeds(t, x)
		}},
		{name: "read/honest-underflow", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			readData(t, fc, h, x, hostileN/2)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetUnderflow(true); r.SetResidualCount(hostileN / 2) }, nil, 0)
			succeeds(t, x)
			if x.cmd.Residual != hostileN/2 || !x.cmd.Underflow {
				t.Fatalf("residual %d underflow %v", x.cmd.Residual, x.cmd.Underflow)
			}
		}},
		{name: "read/underflow-larger-than-the-command", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetUnderflow(true); r.SetResidualCount(hostileN + 512) }, nil, 0)
			fails(t, x, fc, false)
		}},
		{name: "read/underflow-and-overflow-at-once", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetUnderflow(true); r.SetOverflow(true); r.SetResidualCount(512) }, nil, 0)
			fails(t, x, fc, false)
		}},
		{name: "read/residual-without-underflow-or-overflow", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetResidualCount(4096) }, nil, 0)
			succeeds(t, x)
			if x.cmd.Residual != 0 {
				t.Fatalf("a reserved residual count reported: %d", x.cmd.Residual)
			}
		}},
		{name: "read/sense-data-beyond-any-sense-limit", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetStatus(0x02) }, senseSegment(4000, 4000), 0)
			if err := x.wait(t, 10*time.Second); err != nil || x.cmd.Status != 0x02 || len(x.cmd.Sense) > 252 {
				t.Fatalf("CHECK CONDITION with 4000 octets of sense: %v, status %#x, %d octets of sense", err, x.cmd.Status, len(x.cmd.Sense))
			}
			x.judge(t)
		}},
		{name: "read/sense-length-beyond-its-segment", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetStatus(0x02) }, senseSegment(18, 60000), 0)
			if err := x.wait(t, 10*time.Second); err != nil || x.cmd.Status != 0x02 || len(x.cmd.Sense) > 18 {
				t.Fatalf("sense length 60000 in 20 octets: %v, status %#x, %d octets of sense", err, x.cmd.Status, len(x.cmd.Sense))
			}
			x.judge(t)
		}},
		{name: "read/data-segment-length-beyond-the-send", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			p := fc.answer(iscsi.OpSCSIResponse, cmd, nil, nil)
			iscsi.BHS(p).SetDataSegmentLength(4000)
			fc.send(iser.HeaderFields{}, p, 0)
			fails(t, x, fc, false)
		}},
		{name: "read/response-cut-inside-its-bhs", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpSCSIResponse, cmd, nil, nil)[:20], 0)
			fails(t, x, fc, false)
		}},
		{name: "read/target-failure-response", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, func(r iscsi.SCSIResponse) { r.SetResponse(0x01) }, nil, 0)
			fails(t, x, fc, false)
		}},
		{name: "read/nop-in-with-the-commands-itt", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpNOPIn, cmd, func(b iscsi.BHS) { b.SetWord(20, iscsi.ReservedITT) }, nil), 0)
			fails(t, x, fc, false)
		}},
		{name: "read/task-management-response-with-the-commands-itt", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpTaskMgmtResp, cmd, nil, nil), 0)
			fails(t, x, fc, false)
		}},
		{name: "read/reject-of-the-command", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpReject, cmd, func(b iscsi.BHS) { b.SetITT(iscsi.ReservedITT); b[2] = iscsi.RejectProtocolError }, cmd), 0)
			var re *initiator.RejectError
			if err := x.wait(t, 10*time.Second); !errors.As(err, &re) {
				t.Fatalf("rejected command: %v", err)
			}
			x.judge(t)
		}},
		{name: "read/data-in-pdu-under-iser", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpSCSIDataIn, cmd, nil, hostilePattern(512, 1)), 0)
			fails(t, x, fc, false)
		}},
		{name: "read/r2t-under-iser", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpR2T, cmd, nil, nil), 0)
			fails(t, x, fc, false)
		}},
		{name: "read/login-response-in-full-feature-phase", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpLoginResp, cmd, nil, nil), 0)
			fails(t, x, fc, false)
		}},
		{name: "read/nop-in-flood-with-a-command-outstanding", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			// 3000 NOP-Ins, half of them asking for a NOP-Out, paced by
			// those answers so that the initiator's receive queue holds
			// them (beyond it is the next case).
			answered := 0
			for i := 0; i < 3000; i += 32 {
				for j := i; j < i+32; j++ {
					ttt := uint32(j)
					if j%2 == 1 {
						ttt = iscsi.ReservedITT
					}
					nop := fc.answer(iscsi.OpNOPIn, cmd, func(b iscsi.BHS) { b.SetITT(iscsi.ReservedITT); b.SetWord(20, ttt) }, nil)
					for fc.send(iser.HeaderFields{}, nop, 0) != nil {
						if fc.qp.State() == iwarp.StateError {
							t.Fatalf("the fake's connection failed in the flood: %v", fc.qp.Err())
						}
						time.Sleep(100 * time.Microsecond) // send queue full
					}
				}
				for k := 0; k < 16; k++ {
					m := fc.recv(2 * time.Second)
					if m == nil {
						break
					}
					answered++
				}
			}
			t.Logf("%d NOP-Outs for 1500 pings", answered)
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
			succeeds(t, x)
			if err := s.Err(); err != nil {
				t.Fatalf("session ended by a NOP-In flood: %v", err)
			}
		}},
		{name: "read/nop-in-flood-beyond-the-receive-queue", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			// Sends the initiator has posted no receive for: its RNIC
			// terminates the connection, the command fails.
			x := read(t, s)
			_, cmd := expectCommand(t, fc)
			for i := 0; i < 5000 && fc.qp.State() != iwarp.StateError; i++ {
				nop := fc.answer(iscsi.OpNOPIn, cmd, func(b iscsi.BHS) { b.SetITT(iscsi.ReservedITT); b.SetWord(20, iscsi.ReservedITT) }, nil)
				if fc.send(iser.HeaderFields{}, nop, 0) != nil {
					time.Sleep(50 * time.Microsecond)
				}
			}
			fails(t, x, fc, true)
		}},
		{name: "read/async-message-flood", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			h, cmd := expectCommand(t, fc)
			// 992 Asynchronous Messages, each batch of 31 fenced by a
			// ping whose answer says the initiator took them.
			for i := 0; i < 32; i++ {
				for j := 0; j < 31; j++ {
					m := fc.answer(iscsi.OpAsyncMsg, cmd, func(b iscsi.BHS) { b.SetITT(iscsi.ReservedITT); b[36] = 4 }, nil)
					for fc.send(iser.HeaderFields{}, m, 0) != nil {
						if fc.qp.State() == iwarp.StateError {
							t.Fatalf("the fake's connection failed in the flood: %v", fc.qp.Err())
						}
						time.Sleep(100 * time.Microsecond)
					}
				}
				fc.send(iser.HeaderFields{}, fc.answer(iscsi.OpNOPIn, cmd, func(b iscsi.BHS) { b.SetITT(iscsi.ReservedITT); b.SetWord(20, 7) }, nil), 0)
				if fc.recv(5*time.Second) == nil {
					t.Fatalf("the initiator stopped answering pings in an Asynchronous Message flood (batch %d; session %v; QP %v)", i, s.Err(), fc.qp.Err())
				}
			}
			readData(t, fc, h, x, hostileN)
			fc.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
			succeeds(t, x)
		}},
		{name: "read/never-answered", cfg: func(c *initiator.Config) { c.NopTimeout = 500 * time.Millisecond }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			// Nothing is answered, the abort neither: Do returns when its
			// context ends, once the connection is dropped.
			ctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
			defer cancel()
			x := startIO(t, s, initiator.DataIn, ctx)
			h, _ := expectCommand(t, fc)
			if err := x.wait(t, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("unanswered command: %v", err)
			}
			// The target wakes up and writes: nothing reaches the buffer.
			fc.write(h.ReadSTag(), h.ReadBaseOffset(), hostilePattern(hostileN, 6))
			x.judge(t)
			for _, b := range x.cmd.Data {
				if b != preOctet {
					t.Fatal("the unanswered command's buffer changed after Do returned")
				}
			}
		}},
		{name: "read/terminate-with-the-command-outstanding", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := read(t, s)
			expectCommand(t, fc)
			terminate(t, fc)
			if err := x.wait(t, 10*time.Second); err == nil || !strings.Contains(err.Error(), "Terminate") {
				t.Fatalf("command under a Terminate: %v", err)
			}
			x.judge(t)
		}},
		{name: "read/terminate-with-the-command-outstanding-then-recovery", cfg: func(c *initiator.Config) { c.RecoveryTimeout = 10 * time.Second },
			run: func(t *testing.T, ft *fakeTarget, fc *fakeConn, s *initiator.Session) {
				x := read(t, s)
				h, _ := expectCommand(t, fc)
				terminate(t, fc)
				// A well-behaved second connection: the command is reissued.
				fc2 := ft.conn()
				fc2.login(t, nil)
				h2, cmd2 := expectCommand(t, fc2)
				if h2.ReadSTag() == h.ReadSTag() {
					t.Fatal("the reissued command has its old STag")
				}
				readData(t, fc2, h2, x, hostileN)
				fc2.respond(cmd2, nil, nil, mem.STag(h2.ReadSTag()))
				succeeds(t, x)
			}},
		{name: "idle/terminate", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			terminate(t, fc)
			select {
			case <-s.Done():
				if s.Err() == nil {
					t.Fatal("session ended without a reason")
				}
				t.Logf("session's error: %v", s.Err())
			case <-time.After(10 * time.Second):
				t.Fatal("a Terminate while idle did not end the session")
			}
			buf, _ := s.Alloc(512)
			if err := s.Do(bg(), &initiator.Command{CDB: read16(0, 1), Dir: initiator.DataIn, Data: buf}); err == nil {
				t.Fatal("a command on the ended session completed")
			}
		}},
		{name: "idle/terminate-then-recovery", cfg: func(c *initiator.Config) { c.RecoveryTimeout = 10 * time.Second },
			run: func(t *testing.T, ft *fakeTarget, fc *fakeConn, s *initiator.Session) {
				terminate(t, fc)
				fc2 := ft.conn()
				fc2.login(t, nil)
				x := read(t, s)
				h, cmd := expectCommand(t, fc2)
				readData(t, fc2, h, x, hostileN)
				fc2.respond(cmd, nil, nil, mem.STag(h.ReadSTag()))
				succeeds(t, x)
			}},
		{name: "login/terminate", dial: true, before: func(ft *fakeTarget) { ft.recvs.Store(0) },
			run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
				// No receive posted: the first Login Request gets the
				// fake RNIC's Terminate.
				loginFails(t, ft, nil, nil, "Terminate")
			}},
		{name: "login/accepted-then-never-answered", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, func(fc *fakeConn) {}, nil, "login")
		}},
		{name: "login/bad-key-value", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { return withKeys(resp, "MaxBurstLength=banana") }, "")
		}},
		{name: "login/unoffered-key", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { return withKeys(resp, "HeaderDigest=CRC32C") }, "")
		}},
		{name: "login/wrong-stage", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[1] = resp[1]&^0x0c | 0<<2; return resp }, "CSG")
		}},
		{name: "login/next-stage-not-asked-for", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[1] = resp[1]&^0x03 | 2; return resp }, "NSG")
		}},
		{name: "login/wrong-isid", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[9] ^= 0xff; return resp }, "ISID")
		}},
		{name: "login/tsih-zero", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[14], resp[15] = 0, 0; return resp }, "TSIH")
		}},
		{name: "login/wrong-itt", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[19] ^= 0x40; return resp }, "Initiator Task Tag")
		}},
		{name: "login/failure-status", dial: true, run: func(t *testing.T, ft *fakeTarget, _ *fakeConn, _ *initiator.Session) {
			loginFails(t, ft, nil, func(resp []byte) []byte { resp[36], resp[37] = 2, 1; return resp }, "")
		}},
		{name: "write/well-behaved-rdma-read", cfg: func(c *initiator.Config) { c.NoImmediateData = true }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			h, cmd := expectCommand(t, fc)
			if !h.WriteValid() || h.ReadValid() {
				t.Fatalf("write STag %v, read STag %v", h.WriteValid(), h.ReadValid())
			}
			st, data := fc.read(h.WriteSTag(), h.WriteBaseOffset(), hostileN)
			if st != iwarp.StatusSuccess || !bytes.Equal(data, x.legit) {
				t.Fatalf("RDMA Read of the write data: %v, data equal %v", st, bytes.Equal(data, x.legit))
			}
			fc.respond(cmd, nil, nil, mem.STag(h.WriteSTag()))
			succeeds(t, x)
		}},
		{name: "write/rdma-read-past-the-commands-length", cfg: func(c *initiator.Config) { c.NoImmediateData = true }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			h, _ := expectCommand(t, fc)
			if st, _ := fc.read(h.WriteSTag(), h.WriteBaseOffset(), hostileN+1); st == iwarp.StatusSuccess {
				t.Fatal("an RDMA Read past the write buffer succeeded")
			}
			fails(t, x, fc, true)
		}},
		{name: "write/rdma-read-of-the-next-buffer", cfg: func(c *initiator.Config) { c.NoImmediateData = true }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			h, _ := expectCommand(t, fc)
			if st, _ := fc.read(h.WriteSTag(), h.WriteBaseOffset()+hostileN, 512); st == iwarp.StatusSuccess {
				t.Fatal("an RDMA Read of the octets after the write buffer succeeded")
			}
			fails(t, x, fc, true)
		}},
		{name: "write/rdma-read-of-the-immediate-data", run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			// 8 KiB of immediate data fit the first burst: there is no
			// write STag at all, so a Read with a made-up one fails.
			x := startIO(t, s, initiator.DataOut, bg())
			h, _ := expectCommand(t, fc)
			if h.WriteValid() {
				t.Fatal("a write sent whole as immediate data advertises a write STag")
			}
			if st, _ := fc.read(h.WriteSTag()|0x100, h.WriteBaseOffset(), 512); st == iwarp.StatusSuccess {
				t.Fatal("an RDMA Read of immediate data succeeded")
			}
			fails(t, x, fc, true)
		}},
		{name: "write/rdma-write-into-the-write-buffer", cfg: func(c *initiator.Config) { c.NoImmediateData = true }, run: func(t *testing.T, _ *fakeTarget, fc *fakeConn, s *initiator.Session) {
			x := startIO(t, s, initiator.DataOut, bg())
			h, _ := expectCommand(t, fc)
			fc.write(h.WriteSTag(), h.WriteBaseOffset(), hostilePattern(512, 8))
			fails(t, x, fc, true)
			if !bytes.Equal(x.cmd.Data, x.legit) {
				t.Fatal("the write buffer was written")
			}
		}},
	}
}

// terminate makes the fake target's RNIC send a Terminate: it stops
// reposting receives and has the initiator send until they run out
// (NOP-Ins that want an answer); the Send that finds no receive gets the
// Terminate (RFC 5041 section 7.2, no buffer available).
func terminate(t *testing.T, fc *fakeConn) {
	t.Helper()
	// Stop reposting, then make the initiator send until the receives
	// run out: NOP-Ins that want an answer.
	fc.repost.Store(false)
	for i := 0; i < 4*fakeSlots; i++ {
		select {
		case <-fc.qp.Done():
			return
		default:
		}
		nop := fc.answer(iscsi.OpNOPIn, iscsi.BHS(make([]byte, iscsi.BHSLen)), func(b iscsi.BHS) {
			b.SetITT(iscsi.ReservedITT)
			b.SetWord(20, uint32(i))
		}, nil)
		fc.send(iser.HeaderFields{}, nop, 0)
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case <-fc.qp.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the fake target's RNIC sent no Terminate")
	}
}

// withKeys appends key=value pairs to a Login Response's data segment.
func withKeys(resp []byte, kvs ...string) []byte {
	b := iscsi.BHS(resp)
	data := append([]byte(nil), resp[iscsi.BHSLen:iscsi.BHSLen+int(b.DataSegmentLength())]...)
	for _, kv := range kvs {
		data = append(append(data, kv...), 0)
	}
	out := append(append([]byte(nil), resp[:iscsi.BHSLen]...), data...)
	iscsi.BHS(out).SetDataSegmentLength(uint32(len(data)))
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// loginFails dials the fake target, which answers the login with answer
// (nil: login.Target, its last response changed by mangle) and checks
// that Dial fails in time with an error that mentions want.
func loginFails(t *testing.T, ft *fakeTarget, answer func(fc *fakeConn), mangle func([]byte) []byte, want string) {
	t.Helper()
	res := make(chan error, 1)
	start := time.Now()
	go func() {
		s, err := dialFake(victimDev(t), ft, initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:victim",
			NopInterval: -1, Log: quietLog(), Buffers: 1 << 20, LoginTimeout: 2 * time.Second})
		if s != nil {
			s.Close()
			err = fmt.Errorf("logged in")
		}
		res <- err
	}()
	fc := ft.conn()
	switch {
	case answer != nil:
		answer(fc)
	case ft.recvs.Load() > 0:
		fc.login(t, mangle)
	}
	select {
	case err := <-res:
		if err == nil || err.Error() == "logged in" || !strings.Contains(err.Error(), want) {
			t.Fatalf("Dial: %v, want an error about %q", err, want)
		}
		t.Logf("Dial failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatal("Dial hangs")
	}
}

// victimDev is the initiator RNIC of the login cases: the test's own, so
// a failed Dial leaves nothing on the shared one.
func victimDev(t *testing.T) *iwarp.Device {
	dev := iwarp.NewDevice(0)
	t.Cleanup(func() { dev.Close() })
	return dev
}
