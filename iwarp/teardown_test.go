package iwarp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// Graceful close (RFC 5041 6.2.1), from either end: the work posted before
// Disconnect goes out and completes (an RDMA Read included: FIN waits for
// its Response), new work is refused, both QPs reach StateError with the
// remaining receives flushed, and Err stays nil on both sides, also after
// Close.
func TestDisconnectGraceful(t *testing.T) {
	const size, n = 1 << 20, 64 << 10
	for _, who := range []string{"initiator", "responder"} {
		t.Run(who, func(t *testing.T) {
			ini, resp := pair(t, size, ConnConfig{}, ConnConfig{})
			ping(t, ini, resp, 50)
			ping(t, resp, ini, 51)
			a, b := ini, resp // a disconnects
			if who == "responder" {
				a, b = resp, ini
			}
			for id := uint64(100); id < 103; id++ {
				if err := b.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{b.sge(int(id-100)*n, n)}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.qp.PostRecv(&RecvWR{ID: 200, SGL: []SGE{a.sge(0, n)}}); err != nil {
				t.Fatal(err)
			}
			fill(a.buf[4*n:5*n], 9)
			fill(b.buf[6*n:7*n], 11)
			for _, wr := range []SendWR{
				{ID: 1, Op: OpSend, SGL: []SGE{a.sge(4*n, 1000)}},
				{ID: 2, Op: OpWrite, SGL: []SGE{a.sge(4*n, n)}, RemoteSTag: b.mr.STag(), RemoteTO: b.mr.BaseTO() + 8*n},
				{ID: 3, Op: OpRead, SGL: []SGE{a.sge(5*n, n)}, RemoteSTag: b.mr.STag(), RemoteTO: b.mr.BaseTO() + 6*n},
			} {
				if err := a.qp.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
			}
			a.qp.Disconnect()
			if err := a.qp.PostSend(&SendWR{ID: 4, Op: OpSend}); !errors.Is(err, ErrQPState) {
				t.Errorf("PostSend after Disconnect: %v, want ErrQPState", err)
			}
			waitDone(t, "disconnecting side", a.qp)
			waitDone(t, "peer", b.qp)
			for _, e := range []*end{a, b} {
				if err := e.qp.Err(); err != nil {
					t.Errorf("%s: Err() = %v after a graceful close", e.name, err)
				}
			}
			expectWCs(t, "disconnecting side, send queue", collect(t, a.scq), map[uint64]Status{1: 0, 2: 0, 3: 0})
			expectWCs(t, "disconnecting side, receive queue", collect(t, a.rcq), map[uint64]Status{200: StatusFlushed})
			expectWCs(t, "peer, receive queue", collect(t, b.rcq), map[uint64]Status{100: 0, 101: StatusFlushed, 102: StatusFlushed})
			if !bytes.Equal(b.buf[:1000], a.buf[4*n:4*n+1000]) || !bytes.Equal(b.buf[8*n:9*n], a.buf[4*n:5*n]) ||
				!bytes.Equal(a.buf[5*n:6*n], b.buf[6*n:7*n]) {
				t.Error("data differs")
			}
			a.qp.Close()
			b.qp.Close()
			if a.qp.Err() != nil || b.qp.Err() != nil {
				t.Errorf("Err() after Close of a gracefully closed QP: %v, %v", a.qp.Err(), b.qp.Err())
			}
		})
	}
}

// The peer's FIN while this end's RDMA Reads are outstanding: their
// Responses can never come, so the QP fails with MPA error 1 and flushes
// them (it used to wait for them forever).
func TestPeerFINWithReadsOutstanding(t *testing.T) {
	e, p := rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
	p.send(taggedHdr(rdmap.OpWrite, 0, 0, true), nil) // the Responder may send now
	if err := e.qp.PostSend(&SendWR{ID: 1, Op: OpRead, SGL: []SGE{e.sge(0, 100)}, RemoteSTag: 0x4242, RemoteTO: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.next(); err != nil {
		t.Fatal(err)
	}
	p.c.CloseWrite()
	waitDone(t, "engine", e.qp)
	if err := e.qp.Err(); mpa.CodeOf(err) != mpa.CodeLLPLost {
		t.Fatalf("Err() = %v, want MPA error 1", err)
	}
	expectWCs(t, "engine", collect(t, e.scq), map[uint64]Status{1: StatusFlushed})
	if _, err := p.next(); err == nil {
		t.Fatal("the engine sent more")
	}
}

// The peer's connection ends in the middle of an FPDU: the QP fails with
// MPA error 1 (no Terminate can be sent) and its outstanding work is
// flushed.
func TestPeerDisconnectMidTransfer(t *testing.T) {
	const size = 1 << 20
	cases := []struct {
		name string
		// frame returns the FPDU to cut and where.
		frame func(p *rawPeer, e *end) ([]byte, int)
		reset bool // close with a RST rather than a FIN
	}{
		{name: "send-payload", frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 60000))
			return b, 30000
		}},
		{name: "send-payload/reset", reset: true, frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 60000))
			return b, 30000
		}},
		{name: "write-payload", frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true), make([]byte, 60000))
			return b, 40000
		}},
		{name: "header", frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 100))
			return b, 9
		}},
		{name: "length-field", frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 100))
			return b, 1
		}},
		{name: "crc", frame: func(p *rawPeer, e *end) ([]byte, int) {
			b := p.fpdu(taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true), make([]byte, 100))
			return b, len(b) - 2
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, p := rawPair(t, size, ConnConfig{}, rawConfig, 0)
			if err := e.qp.PostRecv(&RecvWR{ID: 100, SGL: []SGE{e.sge(0, 64<<10)}}); err != nil {
				t.Fatal(err)
			}
			p.send(taggedHdr(rdmap.OpWrite, 0, 0, true), nil) // the Responder may send now
			if err := e.qp.PostSend(&SendWR{ID: 1, Op: OpRead, SGL: []SGE{e.sge(size/2, 100)}, RemoteSTag: 0x4242, RemoteTO: 0}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.next(); err != nil { // the Read Request
				t.Fatal(err)
			}
			b, cut := tc.frame(p, e)
			p.write(b[:cut])
			if tc.reset {
				p.c.SetLinger(0)
				p.c.Close()
			} else {
				p.c.CloseWrite()
			}
			waitDone(t, "engine", e.qp)
			err := e.qp.Err()
			var te *TerminateError
			if mpa.CodeOf(err) != mpa.CodeLLPLost || errors.As(err, &te) {
				t.Fatalf("Err() = %v, want MPA error 1", err)
			}
			if !tc.reset && !strings.Contains(err.Error(), "inside the FPDU") {
				t.Errorf("Err() = %v, does not say the FPDU was cut", err)
			}
			expectWCs(t, "engine, send queue", collect(t, e.scq), map[uint64]Status{1: StatusFlushed})
			expectWCs(t, "engine, receive queue", collect(t, e.rcq), map[uint64]Status{100: StatusFlushed})
		})
	}
}

// Close of a QP whose engine lingers after its Terminate (waiting for the
// peer to close) does not wait out the linger.
func TestCloseCutsLinger(t *testing.T) {
	e, p := rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
	p.send(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 8)) // no receive posted
	p.readTerminate()
	// The raw peer keeps its end open: the engine lingers.
	select {
	case <-e.qp.Done():
		t.Fatal("Done before the peer closed or the linger ended")
	case <-time.After(50 * time.Millisecond):
	}
	start := time.Now()
	e.qp.Close()
	if d := time.Since(start); d > terminateGrace/2 {
		t.Fatalf("Close took %v", d)
	}
	var te *TerminateError
	if !errors.As(e.qp.Err(), &te) || te.Remote {
		t.Fatalf("Err() = %v after Close, want the Terminate sent", e.qp.Err())
	}
}

// traffic drives one end of a connection: RDMA Writes, RDMA Reads and
// Sends (paced by the peer's posted receives through credits), reposting
// its own receives, until its QP is done. It records every request it
// posted and every completion.
type traffic struct {
	e, peer      *end
	credits      chan struct{} // Sends this end may post
	peerCredits  chan struct{} // the peer's
	postedSend   map[uint64]bool
	postedRecv   map[uint64]bool
	sendWC       map[uint64]WC
	recvWC       map[uint64]WC
	ok           int
	dup          []WC
	nextS, nextR uint64
}

func newTraffic(e, peer *end) *traffic {
	return &traffic{e: e, peer: peer, credits: make(chan struct{}, 64),
		postedSend: map[uint64]bool{}, postedRecv: map[uint64]bool{}, sendWC: map[uint64]WC{}, recvWC: map[uint64]WC{},
		nextS: 1, nextR: 1 << 32}
}

func (tr *traffic) postRecv() bool {
	id := tr.nextR
	if err := tr.e.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{tr.e.sge(int(id%32)*(64<<10), 64<<10)}}); err != nil {
		return false
	}
	tr.nextR++
	tr.postedRecv[id] = true
	return true
}

func (tr *traffic) run(wg *sync.WaitGroup) {
	defer wg.Done()
	e := tr.e
	const chunk = 256 << 10
	var wcs [64]WC
	sending, outstanding := true, 0
	poll := func() {
		for n := e.scq.Poll(wcs[:]); n > 0; n = e.scq.Poll(wcs[:]) {
			for _, wc := range wcs[:n] {
				if _, dup := tr.sendWC[wc.WRID]; dup {
					tr.dup = append(tr.dup, wc)
				}
				tr.sendWC[wc.WRID] = wc
				outstanding--
				if wc.Status == StatusSuccess {
					tr.ok++
				}
			}
		}
		for n := e.rcq.Poll(wcs[:]); n > 0; n = e.rcq.Poll(wcs[:]) {
			for _, wc := range wcs[:n] {
				if _, dup := tr.recvWC[wc.WRID]; dup {
					tr.dup = append(tr.dup, wc)
				}
				tr.recvWC[wc.WRID] = wc
				if wc.Status == StatusSuccess && tr.postRecv() {
					select {
					case tr.peerCredits <- struct{}{}:
					default:
					}
				}
			}
		}
	}
	for {
		poll()
		select {
		case <-e.qp.Done():
			poll()
			return
		default:
		}
		if !sending || outstanding >= 48 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			e.scq.Wait(ctx, false)
			cancel()
			continue
		}
		id := tr.nextS
		off := int(id%8) * chunk
		wr := SendWR{ID: id}
		switch id % 3 {
		case 0:
			wr.Op, wr.SGL, wr.RemoteSTag, wr.RemoteTO = OpWrite, []SGE{e.sge(off, chunk)}, tr.peer.mr.STag(), tr.peer.mr.BaseTO()+uint64(off)
		case 1:
			wr.Op, wr.SGL, wr.RemoteSTag, wr.RemoteTO = OpRead, []SGE{e.sge(4<<20+off, chunk)}, tr.peer.mr.STag(), tr.peer.mr.BaseTO()+uint64(off)
		case 2:
			select {
			case <-tr.credits: // a receive is posted at the peer
				wr.Op, wr.SGL = OpSend, []SGE{e.sge(off, 60<<10)}
			default:
				wr.Op, wr.SGL, wr.RemoteSTag, wr.RemoteTO = OpWrite, []SGE{e.sge(off, 4096)}, tr.peer.mr.STag(), tr.peer.mr.BaseTO()
			}
		}
		err := e.qp.PostSend(&wr)
		if err != nil && wr.Op == OpSend {
			tr.credits <- struct{}{} // not used
		}
		switch {
		case err == nil:
			tr.postedSend[id] = true
			tr.nextS++
			outstanding++
		case errors.Is(err, ErrQueueFull):
		default:
			sending = false
		}
	}
}

// check verifies that every request posted completed exactly once.
func (tr *traffic) check(t *testing.T) {
	t.Helper()
	if len(tr.dup) > 0 {
		t.Errorf("%s: completed twice: %+v", tr.e.name, tr.dup)
	}
	for _, m := range []struct {
		kind   string
		posted map[uint64]bool
		wcs    map[uint64]WC
	}{{"send", tr.postedSend, tr.sendWC}, {"receive", tr.postedRecv, tr.recvWC}} {
		for id := range m.posted {
			if _, ok := m.wcs[id]; !ok {
				t.Errorf("%s: %s request %d never completed", tr.e.name, m.kind, id)
			}
		}
		for id, wc := range m.wcs {
			if !m.posted[id] {
				t.Errorf("%s: completion %+v of a %s request never posted", tr.e.name, wc, m.kind)
			}
		}
	}
}

// QP.Close in the middle of heavy traffic both ways: both QPs reach
// StateError, every work request posted on either side completes exactly
// once, the closed side reports ErrClosed and its peer a lost connection.
func TestCloseDuringTraffic(t *testing.T) {
	for _, who := range []string{"initiator", "responder"} {
		t.Run(who, func(t *testing.T) {
			ini, resp := pair(t, 8<<20, ConnConfig{}, ConnConfig{})
			ping(t, ini, resp, 1<<40)
			ping(t, resp, ini, 1<<40)
			ti, tr := newTraffic(ini, resp), newTraffic(resp, ini)
			ti.peerCredits, tr.peerCredits = tr.credits, ti.credits
			for _, x := range []*traffic{ti, tr} {
				for range 32 {
					x.postRecv()
					x.peerCredits <- struct{}{}
				}
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go ti.run(&wg)
			go tr.run(&wg)
			closer, peer := ti, tr
			if who == "responder" {
				closer, peer = tr, ti
			}
			time.Sleep(100 * time.Millisecond)
			closer.e.qp.Close()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(testTimeout):
				t.Fatalf("traffic still running: states %v / %v", ini.qp.State(), resp.qp.State())
			}
			ti.check(t)
			tr.check(t)
			if ti.ok+tr.ok < 10 {
				t.Errorf("only %d requests completed before Close", ti.ok+tr.ok)
			}
			if err := closer.e.qp.Err(); err != ErrClosed {
				t.Errorf("closed side: Err() = %v, want ErrClosed", err)
			}
			if err := peer.e.qp.Err(); mpa.CodeOf(err) != mpa.CodeLLPLost {
				t.Errorf("peer: Err() = %v after the other side's abortive Close, want MPA error 1", err)
			}
		})
	}
}

// Device.Close closes every QP of the Device, connected or not; their peers
// see the connection lost (a reset, not a graceful close).
func TestDeviceClose(t *testing.T) {
	dev := NewDevice(0)
	ln := listen(t, dev, ConnConfig{})
	r1, r2 := newSizedEnd(t, "responder 1", dev, 1<<20), newSizedEnd(t, "responder 2", dev, 1<<20)
	idle := newSizedEnd(t, "idle", dev, 4096)
	i1, i2 := newSizedEnd(t, "initiator 1", nil, 1<<20), newSizedEnd(t, "initiator 2", nil, 1<<20)
	connectVia(t, ln, i1, r1, ConnConfig{})
	connectVia(t, ln, i2, r2, ConnConfig{})
	ping(t, i1, r1, 1)
	ping(t, i2, r2, 1)
	ping(t, r2, i2, 2)
	for _, e := range []*end{r1, r2, idle, i1, i2} {
		if err := e.qp.PostRecv(&RecvWR{ID: 100, SGL: []SGE{e.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*end{r1, r2, idle} {
		select {
		case <-e.qp.Done():
		default:
			t.Fatalf("%s: not done after Device.Close", e.name)
		}
		if err := e.qp.Err(); err != ErrClosed {
			t.Errorf("%s: Err() = %v, want ErrClosed", e.name, err)
		}
		expectWCs(t, e.name, collect(t, e.rcq), map[uint64]Status{100: StatusFlushed})
	}
	for _, e := range []*end{i1, i2} {
		waitDone(t, e.name, e.qp)
		if err := e.qp.Err(); mpa.CodeOf(err) != mpa.CodeLLPLost {
			t.Errorf("%s: Err() = %v, want MPA error 1", e.name, err)
		}
		expectWCs(t, e.name, collect(t, e.rcq), map[uint64]Status{100: StatusFlushed})
	}
	if _, err := dev.NewQP(QPConfig{PD: dev.AllocPD(), SendCQ: r1.scq, RecvCQ: r1.rcq}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewQP on a closed Device: %v", err)
	}
	// Its Listener is closed too, and no new one can be made.
	if _, err := ln.Accept(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Accept on a closed Device's Listener: %v", err)
	}
	if _, err := dev.Listen("tcp", "127.0.0.1:0", ConnConfig{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen on a closed Device: %v", err)
	}
}

// A work request that names memory it may not use fails alone with
// StatusLocalProtection; what was posted before it in the same batch still
// goes out and completes, what follows is flushed.
func TestLocalProtectionKeepsEarlierWork(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	fill(ini.buf[:4096], 9)
	// Posted back to back so that the sender takes them in one batch.
	wrs := []SendWR{
		{ID: 1, Op: OpWrite, SGL: []SGE{ini.sge(0, 4096)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()},
		{ID: 2, Op: OpWrite, SGL: []SGE{ini.sge(0, 4096)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 4096},
		{ID: 3, Op: OpWrite, SGL: []SGE{{STag: ini.mr.STag() ^ 0xff, TO: ini.mr.BaseTO(), Len: 16}}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()},
		{ID: 4, Op: OpWrite, SGL: []SGE{ini.sge(0, 4096)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 8192},
	}
	for i := range wrs {
		if err := ini.qp.PostSend(&wrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	ini.expect(ini.scq, 1, WCWrite, StatusSuccess, 4096)
	ini.expect(ini.scq, 2, WCWrite, StatusSuccess, 4096)
	ini.expect(ini.scq, 3, WCWrite, StatusLocalProtection, 0)
	ini.expect(ini.scq, 4, WCWrite, StatusFlushed, 0)
	waitDone(t, ini.name, ini.qp)
	var lf *localFault
	if !errors.As(ini.qp.Err(), &lf) || lf.wr != 3 {
		t.Fatalf("Err() = %v, want the local fault of work request 3", ini.qp.Err())
	}
}

// A receive completion of a Send with Solicited Event wakes a waiter for
// solicited completions; one of a plain Send does not.
func TestSolicitedEvent(t *testing.T) {
	ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
	for id := uint64(1); id <= 2; id++ {
		if err := resp.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	woke := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		woke <- resp.rcq.Wait(ctx, true)
	}()
	if err := ini.qp.PostSend(&SendWR{ID: 1, Op: OpSend, SGL: []SGE{ini.sge(0, 8)}}); err != nil {
		t.Fatal(err)
	}
	ini.expect(ini.scq, 1, WCSend, StatusSuccess, 8)
	// The plain Send's completion is there, and wakes a plain waiter...
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := resp.rcq.Wait(ctx, false); err != nil {
		t.Fatal(err)
	}
	// ...but not the solicited-only one.
	select {
	case err := <-woke:
		t.Fatalf("a plain Send woke a solicited-only waiter (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := resp.rcq.Wait(short, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("solicited-only Wait with only a plain completion queued: %v", err)
	}
	if err := ini.qp.PostSend(&SendWR{ID: 2, Op: OpSendSE, SGL: []SGE{ini.sge(0, 9)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("solicited-only Wait: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("a Send with Solicited Event did not wake the solicited-only waiter")
	}
	wc1 := resp.expect(resp.rcq, 1, WCRecv, StatusSuccess, 8)
	wc2 := resp.expect(resp.rcq, 2, WCRecv, StatusSuccess, 9)
	if wc1.Solicited || !wc2.Solicited {
		t.Fatalf("Solicited: %v, %v; want false, true", wc1.Solicited, wc2.Solicited)
	}
	// Armed notification, solicited only: the same rule.
	if err := resp.qp.PostRecv(&RecvWR{ID: 3, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.qp.PostRecv(&RecvWR{ID: 4, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.rcq.Arm(true); err != nil {
		t.Fatal(err)
	}
	if err := ini.qp.PostSend(&SendWR{ID: 3, Op: OpSend, SGL: []SGE{ini.sge(0, 8)}}); err != nil {
		t.Fatal(err)
	}
	resp.expect(resp.rcq, 3, WCRecv, StatusSuccess, 8)
	select {
	case <-resp.rcq.Notify():
		t.Fatal("a plain Send fired a solicited-only notification")
	case <-time.After(20 * time.Millisecond):
	}
	if err := ini.qp.PostSend(&SendWR{ID: 4, Op: OpSendSE, SGL: []SGE{ini.sge(0, 8)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resp.rcq.Notify():
	case <-time.After(testTimeout):
		t.Fatal("no notification for a Send with Solicited Event")
	}
}

// Tearing everything down leaves no goroutine and no file descriptor
// behind: connections closed every way (Close, Disconnect, Terminate, a
// lost peer, a rejection, a Startup timeout, Device.Close, Listener.Close).
func TestNoLeaks(t *testing.T) {
	goroutines, fds := settle(t, -1, -1)
	t.Run("work", func(t *testing.T) {
		// Close.
		ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
		ping(t, ini, resp, 1)
		ini.qp.Close()
		waitDone(t, "responder", resp.qp)
		// Disconnect.
		ini, resp = pair(t, 1<<20, ConnConfig{}, ConnConfig{})
		ping(t, ini, resp, 1)
		resp.qp.Disconnect()
		waitDone(t, "initiator", ini.qp)
		waitDone(t, "responder", resp.qp)
		// Terminate (both engine ends).
		ini, resp = pair(t, 1<<20, ConnConfig{}, ConnConfig{})
		if err := ini.qp.PostSend(&SendWR{ID: 1, Op: OpWrite, SGL: []SGE{ini.sge(0, 64)}, RemoteSTag: 0x100, RemoteTO: 0}); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "initiator", ini.qp)
		waitDone(t, "responder", resp.qp)
		// Terminate to a raw peer, and a raw peer lost mid-FPDU.
		e, p := rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
		p.send(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 8))
		p.readTerminate()
		p.c.Close()
		waitDone(t, "engine", e.qp)
		e, p = rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
		p.write(p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 1000))[:500])
		p.c.Close()
		waitDone(t, "engine", e.qp)
		// A rejection, a Startup timeout and a garbage Request on one
		// Listener, whose Device is then closed with a connected QP.
		dev := NewDevice(0)
		ln, err := dev.Listen("tcp", "127.0.0.1:0", ConnConfig{StartupTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if req, err := ln.Accept(ctx); err == nil {
				req.Reject(nil)
			}
		}()
		other := newSizedEnd(t, "initiator", nil, 4096)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if _, err := other.qp.Connect(ctx, "tcp", ln.Addr().String(), ConnConfig{}); !errors.Is(err, mpa.ErrRejected) {
			t.Fatalf("Connect: %v", err)
		}
		silent := dialTCP(t, ln.Addr().String())
		garbage := dialTCP(t, ln.Addr().String())
		garbage.Write([]byte("garbage garbage garbage"))
		io.ReadAll(silent)
		io.ReadAll(garbage)
		r := newSizedEnd(t, "responder", dev, 4096)
		connectVia(t, ln, other, r, ConnConfig{})
		// A Startup still pending when the Listener closes.
		pending := dialTCP(t, ln.Addr().String())
		ln.Close()
		io.ReadAll(pending)
		dev.Close()
		waitDone(t, "initiator", other.qp)
	})
	settle(t, goroutines, fds)
}

// dialTCP connects a plain TCP client, closed at the end of the test.
func dialTCP(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// settle waits until the process has no more goroutines and open file
// descriptors than given (-1: none given), and returns the counts; it
// fails the test with a goroutine dump if they stay above.
func settle(t *testing.T, goroutines, fds int) (int, int) {
	t.Helper()
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		runtime.GC()
		g, f := runtime.NumGoroutine(), countFDs()
		if goroutines < 0 || g <= goroutines && f <= fds {
			return g, f
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines (before: %d), %d file descriptors (before: %d):\n%s", g, goroutines, f, fds, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An Initiator that closes (FIN) after the MPA Reply and before any FPDU
// ends the connection gracefully: the Responder, still waiting for a first
// FPDU to speak (RFC 5044 7.1.2 rule 4), answers with its own FIN, and its
// QP finishes with posted receives flushed. (Linux siw closes like this
// when it dislikes a Reply.)
func TestResponderPeerClosesBeforeFirstFPDU(t *testing.T) {
	e, p := rawPair(t, 1<<16, ConnConfig{}, rawConfig, 0)
	if err := e.qp.PostRecv(&RecvWR{ID: 5, SGL: []SGE{e.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := p.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, e.name, e.qp)
	if err := e.qp.Err(); err != nil {
		t.Errorf("Err() = %v, want nil for a graceful close", err)
	}
	expectWCs(t, e.name, collect(t, e.rcq), map[uint64]Status{5: StatusFlushed})
	if _, err := p.next(); !errors.Is(err, io.EOF) {
		t.Errorf("the raw peer read %v, want the Responder's FIN", err)
	}
}
