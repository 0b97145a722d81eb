package iwarp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// This file holds the helpers of the error-path and connection-management
// tests: ends of any buffer size, connections through one Listener, a way
// to collect every completion, and the raw peer.

// testTimeout bounds every wait of these tests.
const testTimeout = 10 * time.Second

// rawConfig is the raw peer's usual MPA configuration: revision 2 with an
// IRD and ORD of 16 (a zero ORD in the Request would leave the engine no
// IRD).
var rawConfig = mpa.StartupConfig{IRD: 16, ORD: 16}

// newSizedEnd is newEnd with a registered buffer of size octets (the
// 32 MiB of newEnd cost time to fault in under -race).
func newSizedEnd(t testing.TB, name string, dev *Device, size int) *end {
	t.Helper()
	if dev == nil {
		dev = NewDevice(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &end{t: t, dev: dev, pd: dev.AllocPD(), name: name, ctx: ctx}
	var err error
	if e.scq, err = dev.NewCQ(1024); err != nil {
		t.Fatal(err)
	}
	if e.rcq, err = dev.NewCQ(1024); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = dev.NewQP(QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq}); err != nil {
		t.Fatal(err)
	}
	if e.m, err = mem.Anonymous(size); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = dev.Register(e.pd, e.m, 0, size, mem.LocalWrite|mem.RemoteWrite|mem.RemoteRead|mem.RemoteInvalidate); err != nil {
		t.Fatal(err)
	}
	e.buf = e.mr.Bytes()
	t.Cleanup(e.close)
	return e
}

// register registers n octets more under pd (the end's own when zero) with
// acc, on the end's Device, deregistered at the end of the test.
func (e *end) register(pd mem.PD, n int, acc mem.Access) *mem.MR {
	e.t.Helper()
	if pd.IsZero() {
		pd = e.pd
	}
	m, err := mem.Anonymous(n)
	if err != nil {
		e.t.Fatal(err)
	}
	mr, err := e.dev.Register(pd, m, 0, n, acc)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := e.dev.Deregister(ctx, mr); err != nil {
			e.t.Errorf("deregister: %v", err)
		}
		m.Close()
	})
	return mr
}

// listen starts a loopback Listener on dev, closed at the end of the test.
func listen(t testing.TB, dev *Device, cfg ConnConfig) *Listener {
	t.Helper()
	ln, err := dev.Listen(testNet, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// acceptOne accepts the next connection of ln into qp in the background;
// the channel gets Accept's result.
func acceptOne(ln *Listener, qp *QP) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		req, err := ln.Accept(ctx)
		if err != nil {
			ch <- err
			return
		}
		ch <- req.Accept(qp, nil)
	}()
	return ch
}

// connectVia connects ini to the Listener ln, whose next connection resp
// accepts.
func connectVia(t testing.TB, ln *Listener, ini, resp *end, icfg ConnConfig) {
	t.Helper()
	accepted := acceptOne(ln, resp.qp)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := ini.qp.Connect(ctx, testNet, ln.Addr().String(), icfg); err != nil {
		t.Fatalf("connect: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
}

// pair connects two fresh ends with buffers of size octets.
func pair(t testing.TB, size int, icfg, rcfg ConnConfig) (ini, resp *end) {
	t.Helper()
	if testNet == netPipe {
		return pipePair(t, size)
	}
	ini, resp = newSizedEnd(t, "initiator", nil, size), newSizedEnd(t, "responder", nil, size)
	connectVia(t, listen(t, resp.dev, rcfg), ini, resp, icfg)
	return ini, resp
}

// waitDone waits until the QP's Done closes.
func waitDone(t testing.TB, name string, q *QP) {
	t.Helper()
	select {
	case <-q.Done():
	case <-time.After(testTimeout):
		t.Fatalf("%s: QP still %v after %v (err %v)", name, q.State(), testTimeout, q.Err())
	}
	if s := q.State(); s != StateError {
		t.Fatalf("%s: Done closed in state %v", name, s)
	}
}

// collect polls every completion queued on cq, failing on a work request
// that completed twice.
func collect(t testing.TB, cq *CQ) map[uint64]WC {
	t.Helper()
	got := make(map[uint64]WC)
	var wcs [32]WC
	for {
		n := cq.Poll(wcs[:])
		if n == 0 {
			return got
		}
		for _, wc := range wcs[:n] {
			if prev, dup := got[wc.WRID]; dup {
				t.Fatalf("work request %d completed twice: %+v and %+v", wc.WRID, prev, wc)
			}
			got[wc.WRID] = wc
		}
	}
}

// expectWCs checks that got holds exactly the completions want lists, by
// work request ID and status.
func expectWCs(t testing.TB, name string, got map[uint64]WC, want map[uint64]Status) {
	t.Helper()
	for id, st := range want {
		wc, ok := got[id]
		switch {
		case !ok:
			t.Errorf("%s: no completion for work request %d (want %v)", name, id, st)
		case wc.Status != st:
			t.Errorf("%s: work request %d completed %v, want %v", name, id, wc.Status, st)
		}
	}
	for id, wc := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: unexpected completion %+v", name, wc)
		}
	}
}

// terminateErr checks that q failed through a Terminate carrying want, sent
// by this end (remote false) or received from the peer (remote true).
func terminateErr(t testing.TB, name string, q *QP, remote bool, want rdmap.Error) {
	t.Helper()
	var te *TerminateError
	if err := q.Err(); !errors.As(err, &te) {
		t.Fatalf("%s: Err() = %v, want a *TerminateError", name, err)
	}
	if te.Remote != remote || te.Err != want {
		t.Fatalf("%s: Err() = %v (Remote %v, %v), want Remote %v, %v", name, te, te.Remote, te.Err, remote, want)
	}
}

// rawPeer is a hand-driven MPA Initiator over a plain TCP connection: it
// runs the MPA Startup with the mpa codecs, then writes FPDUs it builds
// with mpa.Framer from hand-made DDP/RDMAP headers (valid or not), and
// deframes what the engine sends back.
type rawPeer struct {
	t   testing.TB
	c   *net.TCPConn
	neg mpa.Negotiated
	fr  *mpa.Framer
	df  *mpa.Deframer
	msn [3]uint32 // next MSN per untagged queue

	rbuf   []byte
	rb, re int
	seg    []byte
}

// dialRaw connects to addr and runs the MPA Startup as Initiator with cfg.
// rcvbuf, when not 0, fixes the socket's receive buffer (so that the engine
// blocks writing to a raw peer that does not read).
func dialRaw(t testing.TB, addr string, cfg mpa.StartupConfig, rcvbuf int) *rawPeer {
	t.Helper()
	d := net.Dialer{Timeout: testTimeout}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, c: nc.(*net.TCPConn), msn: [3]uint32{1, 1, 1}, rbuf: make([]byte, 256<<10)}
	t.Cleanup(func() { p.c.Close() })
	p.c.SetDeadline(time.Now().Add(testTimeout))
	req := cfg.Request(nil)
	frame, err := req.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.c.Write(frame); err != nil {
		t.Fatal(err)
	}
	reply, err := readStartup(p.c, mpa.Reply)
	if err != nil {
		t.Fatalf("raw peer: MPA Reply: %v", err)
	}
	st := reply.Startup()
	if st.R {
		t.Fatalf("raw peer: rejected: %q", st.PrivateData)
	}
	if p.neg, err = mpa.Negotiate(mpa.Initiator, &cfg, &st); err != nil {
		t.Fatalf("raw peer: negotiate: %v", err)
	}
	p.fr = mpa.NewFramer(0, p.neg.TxMarkers, p.neg.CRC)
	p.df = mpa.NewDeframer(0, p.neg.RxMarkers, p.neg.CRC)
	return p
}

// rawPair starts a Listener on a fresh end's Device with rcfg and connects
// a raw peer to it, which the end accepts.
func rawPair(t testing.TB, size int, rcfg ConnConfig, cfg mpa.StartupConfig, rcvbuf int) (*end, *rawPeer) {
	t.Helper()
	e := newSizedEnd(t, "engine", nil, size)
	ln := listen(t, e.dev, rcfg)
	accepted := acceptOne(ln, e.qp)
	p := dialRaw(t, ln.Addr().String(), cfg, rcvbuf)
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	return e, p
}

// fpdu frames one FPDU whose ULPDU is hdr followed by payload and returns
// its stream octets (Markers included).
func (p *rawPeer) fpdu(hdr, payload []byte) []byte {
	iov, err := p.fr.AppendFPDU(nil, hdr, payload)
	if err != nil {
		p.t.Fatal(err)
	}
	var b []byte
	for _, v := range iov {
		b = append(b, v...)
	}
	p.fr.Reset()
	return b
}

// write writes octets to the engine.
func (p *rawPeer) write(b []byte) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := p.c.Write(b); err != nil {
		p.t.Fatalf("raw peer: write: %v", err)
	}
}

// send frames and writes one FPDU.
func (p *rawPeer) send(hdr, payload []byte) { p.write(p.fpdu(hdr, payload)) }

// taggedHdr returns a tagged DDP header with the RDMAP opcode op.
func taggedHdr(op rdmap.Opcode, stag uint32, to uint64, last bool) []byte {
	f := ddp.TaggedFields{Last: last, RsvdULP: uint8(rdmap.MakeControl(op)), STag: stag, TO: to}
	b := make([]byte, ddp.TaggedHeaderLen)
	f.Encode(b)
	return b
}

// untaggedHdr returns an untagged DDP header with the RDMAP opcode op on
// queue qn.
func untaggedHdr(op rdmap.Opcode, qn, msn, mo, inv uint32, last bool) []byte {
	f := ddp.UntaggedFields{Last: last, RsvdULP: uint8(rdmap.MakeControl(op)), RsvdULP32: inv, QN: qn, MSN: msn, MO: mo}
	b := make([]byte, ddp.UntaggedHeaderLen)
	f.Encode(b)
	return b
}

// readRequestHdr returns the header and payload of an RDMA Read Request
// with the given MSN.
func readRequestHdr(msn uint32, f rdmap.ReadRequestFields) []byte {
	b := untaggedHdr(rdmap.OpReadRequest, rdmap.QNReadRequest, msn, 0, 0, true)
	rr := make([]byte, rdmap.ReadRequestLen)
	f.Encode(rr)
	return append(b, rr...)
}

// next returns the next DDP Segment the engine sent (a copy), or the
// error that ended the stream: io.EOF at a FIN between FPDUs.
func (p *rawPeer) next() ([]byte, error) {
	p.seg = p.seg[:0]
	for {
		if p.rb == p.re {
			p.c.SetReadDeadline(time.Now().Add(testTimeout))
			n, err := p.c.Read(p.rbuf)
			if err != nil {
				if errors.Is(err, io.EOF) && !p.df.AtBoundary() {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			p.rb, p.re = 0, n
		}
		ev, data, n, err := p.df.Next(p.rbuf[p.rb:p.re])
		p.rb += n
		switch ev {
		case mpa.ULPDUStart:
			p.seg = p.seg[:0]
		case mpa.ULPDUData:
			p.seg = append(p.seg, data...)
		case mpa.FPDUEnd:
			if err != nil {
				return nil, err
			}
			return append([]byte(nil), p.seg...), nil
		}
	}
}

// rawStats counts what the raw peer read before a Terminate.
type rawStats struct {
	segments     int
	readRespData int // payload octets of RDMA Read Responses
}

// readTerminate reads segments until the engine's Terminate and returns
// its Terminate Header, then checks that the engine closes the stream
// gracefully after it (the Terminate is the last message).
func (p *rawPeer) readTerminate() (rdmap.Terminate, rawStats) {
	p.t.Helper()
	var st rawStats
	for {
		seg, err := p.next()
		if err != nil {
			p.t.Fatalf("raw peer: no Terminate after %d segments: %v", st.segments, err)
		}
		h, payload, err := rdmap.Parse(seg)
		if err != nil {
			p.t.Fatalf("raw peer: the engine sent a bad segment % x: %v", seg, err)
		}
		op := rdmap.ControlOf(h).Opcode()
		if op != rdmap.OpTerminate {
			st.segments++
			if op == rdmap.OpReadResponse {
				st.readRespData += len(payload)
			}
			continue
		}
		if !h.Last() || h.MSN() != 1 {
			p.t.Errorf("raw peer: Terminate header L %v MSN %d", h.Last(), h.MSN())
		}
		t, err := rdmap.ParseTerminate(payload)
		if err != nil {
			p.t.Fatalf("raw peer: Terminate payload % x: %v", payload, err)
		}
		if seg, err := p.next(); err != io.EOF {
			p.t.Errorf("raw peer: after the Terminate: segment % x, error %v; want a FIN", seg, err)
		}
		return append(rdmap.Terminate(nil), t...), st
	}
}

func (p *rawPeer) String() string { return fmt.Sprintf("raw peer %v", p.c.LocalAddr()) }
