package iwarp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// The Responder rejects with Private Data: Connect returns a
// *RejectedError that carries it and is mpa.ErrRejected; the QP stays
// idle and can connect again.
func TestConnectRejected(t *testing.T) {
	ini, resp := newSizedEnd(t, "initiator", nil, 1<<20), newSizedEnd(t, "responder", nil, 1<<20)
	ln := listen(t, resp.dev, ConnConfig{})
	for _, rev := range []uint8{1, 2} {
		t.Run(fmt.Sprint("rev", rev), func(t *testing.T) {
			type result struct {
				req *ConnRequest
				err error
			}
			ch := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				req, err := ln.Accept(ctx)
				if err == nil {
					err = req.Reject([]byte("no room at the inn"))
				}
				ch <- result{req, err}
			}()
			icfg := ConnConfig{PrivateData: []byte("knock knock")}
			icfg.MPA.Revision = rev
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			pd, err := ini.qp.Connect(ctx, "tcp", ln.Addr().String(), icfg)
			var rej *RejectedError
			if !errors.As(err, &rej) || !errors.Is(err, mpa.ErrRejected) {
				t.Fatalf("Connect: %v, want a *RejectedError", err)
			}
			if string(rej.PrivateData) != "no room at the inn" || string(pd) != "no room at the inn" {
				t.Fatalf("rejection Private Data %q (returned %q)", rej.PrivateData, pd)
			}
			if !strings.Contains(err.Error(), "no room at the inn") {
				t.Errorf("error %q does not quote the Private Data", err)
			}
			r := <-ch
			if r.err != nil {
				t.Fatalf("Reject: %v", r.err)
			}
			if string(r.req.PrivateData()) != "knock knock" || r.req.Revision() != rev {
				t.Errorf("request: Private Data %q, revision %d", r.req.PrivateData(), r.req.Revision())
			}
			if err := r.req.Accept(resp.qp, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Accept after Reject: %v, want ErrClosed", err)
			}
			if s := ini.qp.State(); s != StateIdle {
				t.Fatalf("initiator in state %v after the rejection", s)
			}
		})
	}
	// The same QPs connect afterwards.
	connectVia(t, ln, ini, resp, ConnConfig{})
	ping(t, ini, resp, 1)
	ping(t, resp, ini, 2)
}

// Accept with a QP that cannot take the connection rejects it and returns
// an error (it used to deadlock, calling Reject inside its own sync.Once).
func TestAcceptQPNotIdle(t *testing.T) {
	ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
	ln := listen(t, resp.dev, ConnConfig{})
	closed := newSizedEnd(t, "closed", resp.dev, 4096)
	closed.qp.Close()
	for _, q := range []struct {
		name string
		qp   *QP
	}{{"connected", resp.qp}, {"closed", closed.qp}} {
		t.Run(q.name, func(t *testing.T) {
			other := newSizedEnd(t, "initiator", nil, 4096)
			accepted := acceptOne(ln, q.qp)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := other.qp.Connect(ctx, "tcp", ln.Addr().String(), ConnConfig{})
			if !errors.Is(err, mpa.ErrRejected) {
				t.Fatalf("Connect: %v, want a rejection", err)
			}
			select {
			case err := <-accepted:
				if !errors.Is(err, ErrQPState) {
					t.Fatalf("Accept: %v, want ErrQPState", err)
				}
			case <-time.After(testTimeout):
				t.Fatal("Accept hangs")
			}
		})
	}
	ping(t, ini, resp, 1)
}

// MPA revisions and the RFC 6581 IRD/ORD negotiation: each end's ORD is
// limited by the peer's IRD; revision 1 keeps each end's own values. The
// engine's queues follow the negotiated depths.
func TestConnectIRDORD(t *testing.T) {
	type depths struct{ ird, ord uint16 }
	cases := []struct {
		irev, rrev         uint8
		icfg, rcfg         depths
		rev                uint8
		wantIni, wantResp  depths
		iniReads, respRead bool
	}{
		{2, 2, depths{4, 2}, depths{8, 8}, 2, depths{4, 2}, depths{2, 4}, true, true},
		{2, 2, depths{8, 8}, depths{4, 2}, 2, depths{2, 4}, depths{4, 2}, true, true},
		{2, 2, depths{0, 0}, depths{0, 0}, 2, depths{16, 16}, depths{16, 16}, true, true},
		{2, 2, depths{4, 0}, depths{8, 8}, 2, depths{4, 0}, depths{0, 4}, false, true},
		{1, 2, depths{4, 2}, depths{8, 8}, 1, depths{4, 2}, depths{8, 8}, true, true},
		{2, 1, depths{4, 2}, depths{8, 8}, 1, depths{4, 2}, depths{8, 8}, true, true},
		{1, 1, depths{3, 5}, depths{6, 7}, 1, depths{3, 5}, depths{6, 7}, true, true},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("rev%d-%d/%d-%d/%d-%d", tc.irev, tc.rrev, tc.icfg.ird, tc.icfg.ord, tc.rcfg.ird, tc.rcfg.ord)
		t.Run(name, func(t *testing.T) {
			var icfg, rcfg ConnConfig
			icfg.MPA.Revision, icfg.MPA.IRD, icfg.MPA.ORD = tc.irev, tc.icfg.ird, tc.icfg.ord
			rcfg.MPA.Revision, rcfg.MPA.IRD, rcfg.MPA.ORD = tc.rrev, tc.rcfg.ird, tc.rcfg.ord
			ini, resp := pair(t, 1<<20, icfg, rcfg)
			for _, s := range []struct {
				name string
				e    *end
				want depths
			}{{"initiator", ini, tc.wantIni}, {"responder", resp, tc.wantResp}} {
				c := s.e.qp.conn
				if c.neg.Rev != tc.rev || c.neg.IRD != s.want.ird || c.neg.ORD != s.want.ord {
					t.Errorf("%s: revision %d IRD %d ORD %d, want %d, %d, %d", s.name, c.neg.Rev, c.neg.IRD, c.neg.ORD, tc.rev, s.want.ird, s.want.ord)
				}
				if len(c.resps) != int(s.want.ird) || len(c.reads)-1 != int(s.want.ord) {
					t.Errorf("%s: queues for %d Read Requests and %d Reads, want %d and %d", s.name, len(c.resps), len(c.reads)-1, s.want.ird, s.want.ord)
				}
			}
			ping(t, ini, resp, 9) // the Initiator speaks first (RFC 5044 7.1.2 rule 4)
			for _, d := range []struct {
				src, dst *end
				ok       bool
			}{{ini, resp, tc.iniReads}, {resp, ini, tc.respRead}} {
				err := d.src.qp.PostSend(&SendWR{ID: 1, Op: OpRead, SGL: []SGE{d.src.sge(4096, 100)}, RemoteSTag: d.dst.mr.STag(), RemoteTO: d.dst.mr.BaseTO()})
				if !d.ok {
					if !errors.Is(err, ErrNoORD) {
						t.Errorf("%s: RDMA Read with ORD 0: %v, want ErrNoORD", d.src.name, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				d.src.expect(d.src.scq, 1, WCRead, StatusSuccess, 100)
			}
		})
	}
}

// More RDMA Reads than the ORD: the sender holds them until Read
// Responses free ORD slots, so that the peer, whose IRD is that ORD, sees
// no more outstanding than it can take; all complete, in order, with the
// right data.
func TestORDExceeded(t *testing.T) {
	const size = 8 << 20
	var icfg, rcfg ConnConfig
	icfg.MPA.IRD, icfg.MPA.ORD = 2, 2
	rcfg.MPA.IRD, rcfg.MPA.ORD = 8, 8
	ini, resp := pair(t, size, icfg, rcfg)
	if ord, ird := len(ini.qp.conn.reads)-1, len(resp.qp.conn.resps); ord != 2 || ird != 2 {
		t.Fatalf("initiator ORD %d, responder IRD %d, want 2 and 2", ord, ird)
	}
	fill(resp.buf, 3)
	const reads = 100
	off := make([]int, reads)
	n := make([]int, reads)
	for round := range 2 {
		pos := 0
		for i := range reads {
			n[i] = 1 + (i*7919)%(64<<10)
			if i%10 == 0 {
				n[i] = 0
			}
			off[i] = (i * 40009) % (size - 64<<10)
			if err := ini.qp.PostSend(&SendWR{ID: uint64(i), Op: OpRead, SGL: []SGE{ini.sge(pos, n[i])},
				RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + uint64(off[i])}); err != nil {
				t.Fatal(err)
			}
			pos += n[i]
		}
		pos = 0
		for i := range reads {
			ini.expect(ini.scq, uint64(i), WCRead, StatusSuccess, uint32(n[i]))
			if !bytes.Equal(ini.buf[pos:pos+n[i]], resp.buf[off[i]:off[i]+n[i]]) {
				t.Fatalf("round %d: Read %d (%d octets at %d): data differs", round, i, n[i], off[i])
			}
			pos += n[i]
		}
	}
	if ini.qp.State() != StateRTS || resp.qp.State() != StateRTS {
		t.Fatalf("states %v / %v, errors %v / %v", ini.qp.State(), resp.qp.State(), ini.qp.Err(), resp.qp.Err())
	}
}

// Startup parameters the Responder cannot accept: it answers with a
// rejecting Reply, Accept returns why, and Connect sees the rejection.
func TestConnectRefusedParameters(t *testing.T) {
	cases := []struct {
		name       string
		icfg, rcfg mpa.StartupConfig
		want       error
	}{
		{"markers-refused", mpa.StartupConfig{Markers: true}, mpa.StartupConfig{RefuseMarkers: true}, mpa.ErrMarkersRefused},
		{"markers-refused/rev1", mpa.StartupConfig{Revision: 1, Markers: true}, mpa.StartupConfig{RefuseMarkers: true}, mpa.ErrMarkersRefused},
		{"no-matching-rtr", mpa.StartupConfig{PeerToPeer: true, RTR: mpa.RTRSend}, mpa.StartupConfig{RTR: mpa.RTRWrite | mpa.RTRRead}, mpa.ErrNoMatchingRTR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ini, resp := newSizedEnd(t, "initiator", nil, 4096), newSizedEnd(t, "responder", nil, 4096)
			ln := listen(t, resp.dev, ConnConfig{MPA: tc.rcfg})
			accepted := acceptOne(ln, resp.qp)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := ini.qp.Connect(ctx, "tcp", ln.Addr().String(), ConnConfig{MPA: tc.icfg})
			var rej *RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("Connect: %v, want a rejection", err)
			}
			if err := <-accepted; !errors.Is(err, tc.want) {
				t.Fatalf("Accept: %v, want %v", err, tc.want)
			}
			if ini.qp.State() != StateIdle || resp.qp.State() != StateIdle {
				t.Fatalf("states %v / %v after the refusal", ini.qp.State(), resp.qp.State())
			}
		})
	}
}

// A client that connects and says nothing is dropped after the Startup
// timeout and recorded; another connects meanwhile without waiting for it.
func TestStartupTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ini, resp := newSizedEnd(t, "initiator", nil, 1<<20), newSizedEnd(t, "responder", nil, 1<<20)
	ln := listen(t, resp.dev, ConnConfig{StartupTimeout: timeout})
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	connectVia(t, ln, ini, resp, ConnConfig{})
	ping(t, ini, resp, 1)
	if d := time.Since(start); d >= timeout {
		t.Fatalf("the other connection took %v, as long as the silent client's timeout", d)
	}
	silent.SetReadDeadline(time.Now().Add(testTimeout))
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent client: read %d, %v; want EOF", n, err)
	}
	if d := time.Since(start); d < timeout-50*time.Millisecond {
		t.Fatalf("silent client dropped after %v, before the %v timeout", d, timeout)
	}
	errs := ln.StartupErrors()
	if len(errs) != 1 || !errors.Is(errs[0], os.ErrDeadlineExceeded) || !strings.Contains(errs[0].Error(), silent.LocalAddr().String()) {
		t.Fatalf("startup errors %v, want one timeout of %v", errs, silent.LocalAddr())
	}
	if errs := ln.StartupErrors(); len(errs) != 0 {
		t.Fatalf("StartupErrors did not forget: %v", errs)
	}
}

// An invalid MPA Request is dropped, and the Listener records why, naming
// the client.
func TestStartupBadRequest(t *testing.T) {
	good := mpa.StartupConfig{}
	valid := func(mod func(b []byte) []byte) []byte {
		req := good.Request([]byte("pd"))
		b, _ := req.Append(nil)
		return mod(b)
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"bad-key", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), mpa.ErrStartupKey},
		{"reply", valid(func(b []byte) []byte { copy(b, mpa.KeyReply); return b }), mpa.ErrUnexpectedReply},
		{"revision", valid(func(b []byte) []byte { b[17] = 3; return b }), mpa.ErrStartupRevision},
		{"pd-length", valid(func(b []byte) []byte { b[18], b[19] = 0x02, 0x01; return b }), mpa.ErrPDLength},
		{"rev2-without-irdord", valid(func(b []byte) []byte { b[18], b[19] = 0, 2; return b[:22] }), mpa.ErrNoIRDORD},
		{"truncated", valid(func(b []byte) []byte { return b[:10] }), io.ErrUnexpectedEOF},
	}
	resp := newSizedEnd(t, "responder", nil, 4096)
	ln := listen(t, resp.dev, ConnConfig{StartupTimeout: testTimeout})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			if tc.want == io.ErrUnexpectedEOF {
				c.(*net.TCPConn).CloseWrite()
			}
			// Closed: a FIN, or a RST when the Listener left octets unread.
			c.SetReadDeadline(time.Now().Add(testTimeout))
			if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the Listener did not close the connection: %v", err)
			}
			errs := ln.StartupErrors()
			if len(errs) != 1 || !errors.Is(errs[0], tc.want) || !strings.Contains(errs[0].Error(), c.LocalAddr().String()) {
				t.Fatalf("startup errors %v, want one %v naming %v", errs, tc.want, c.LocalAddr())
			}
			if tc.want != io.ErrUnexpectedEOF && mpa.CodeOf(errs[0]) != mpa.CodeStartup {
				t.Errorf("MPA code %d, want %d", mpa.CodeOf(errs[0]), mpa.CodeStartup)
			}
		})
	}
	// The Listener still works.
	ini := newSizedEnd(t, "initiator", nil, 4096)
	connectVia(t, ln, ini, resp, ConnConfig{})
	ping(t, ini, resp, 1)
}

// The peer-to-peer model of RFC 6581 with each RTR message: both ends
// agree on it, the Responder consumes it (a Send RTR takes no receive),
// and traffic flows both ways after it.
func TestPeerToPeer(t *testing.T) {
	for _, rtr := range []mpa.RTR{mpa.RTRWrite, mpa.RTRRead, mpa.RTRSend} {
		for _, markers := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/markers-%v", rtr, markers), func(t *testing.T) {
				icfg := ConnConfig{EMSS: 1460}
				icfg.MPA.PeerToPeer, icfg.MPA.RTR, icfg.MPA.Markers = true, rtr, markers
				rcfg := ConnConfig{EMSS: 1460}
				rcfg.MPA.RTR, rcfg.MPA.Markers = rtr, markers
				ini, resp := newSizedEnd(t, "initiator", nil, 4<<20), newSizedEnd(t, "responder", nil, 4<<20)
				// A receive posted before the connection exists: the Send
				// RTR must not complete it.
				if err := resp.qp.PostRecv(&RecvWR{ID: 9, SGL: []SGE{resp.sge(3<<20, 100)}}); err != nil {
					t.Fatal(err)
				}
				connectVia(t, listen(t, resp.dev, rcfg), ini, resp, icfg)
				for _, e := range []*end{ini, resp} {
					if n := e.qp.conn.neg; !n.PeerToPeer || n.RTR != rtr {
						t.Fatalf("%s: peer-to-peer %v with RTR %v, want %v", e.name, n.PeerToPeer, n.RTR, rtr)
					}
				}
				// The Responder's first message goes out only after the
				// RTR arrived (RFC 5044 7.1.2 rule 4): a Send from it first.
				if err := ini.qp.PostRecv(&RecvWR{ID: 8, SGL: []SGE{ini.sge(3<<20, 100)}}); err != nil {
					t.Fatal(err)
				}
				if err := resp.qp.PostSend(&SendWR{ID: 8, Op: OpSend, SGL: []SGE{resp.sge(0, 10)}}); err != nil {
					t.Fatal(err)
				}
				resp.expect(resp.scq, 8, WCSend, StatusSuccess, 10)
				ini.expect(ini.rcq, 8, WCRecv, StatusSuccess, 10)
				if err := ini.qp.PostSend(&SendWR{ID: 9, Op: OpSend, SGL: []SGE{ini.sge(0, 11)}}); err != nil {
					t.Fatal(err)
				}
				ini.expect(ini.scq, 9, WCSend, StatusSuccess, 11)
				resp.expect(resp.rcq, 9, WCRecv, StatusSuccess, 11)
				for _, n := range []int{0, 1000, 70000} {
					exchange(t, ini, resp, n)
				}
			})
		}
	}
}

// RFC 5044 7.1.2 rule 4: the Responder sends nothing, not even a Marker,
// until it has received a valid FPDU; then what was posted goes out.
func TestResponderWaitsForFirstFPDU(t *testing.T) {
	cfg := rawConfig
	cfg.Markers = true // a Marker would be the first thing it could send
	e, p := rawPair(t, 1<<20, ConnConfig{}, cfg, 0)
	if err := e.qp.PostSend(&SendWR{ID: 1, Op: OpWrite, SGL: []SGE{e.sge(0, 16)}, RemoteSTag: 0x1234, RemoteTO: 7}); err != nil {
		t.Fatal(err)
	}
	p.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if n, err := p.c.Read(b[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the Responder sent %d octets (%v) before receiving an FPDU", n, err)
	}
	p.send(taggedHdr(rdmap.OpWrite, 0, 0, true), nil) // a zero-length RDMA Write
	seg, err := p.next()
	if err != nil {
		t.Fatal(err)
	}
	h, payload, err := ddp.Parse(seg)
	if err != nil || !h.Tagged() || h.STag() != 0x1234 || h.TO() != 7 || len(payload) != 16 {
		t.Fatalf("first FPDU from the Responder: %x (%v)", seg, err)
	}
	e.expect(e.scq, 1, WCWrite, StatusSuccess, 16)
}

// TestStartupFlood: connections that send no MPA Request are bounded per
// address and in all; beyond that a new one is closed at once and
// counted, and a real connection gets through once the flood is gone.
func TestStartupFlood(t *testing.T) {
	ini, resp := newSizedEnd(t, "initiator", nil, 1<<20), newSizedEnd(t, "responder", nil, 1<<20)
	ln := listen(t, resp.dev, ConnConfig{MaxStartups: 4, MaxStartupsPerPeer: 3})
	var idle []net.Conn
	dial := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closedSoon dials from src and reports whether the listener closes
	// the connection at once (its reset may even beat connect's return).
	closedSoon := func(src string) bool {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			return errors.Is(err, syscall.ECONNRESET)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err = c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	for i := 0; i < 3; i++ {
		idle = append(idle, dial("127.0.0.1"))
	}
	waitFor(t, func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return len(ln.pending) == 3 })
	if !closedSoon("127.0.0.1") {
		t.Fatal("a fourth half-open connection from one address was kept")
	}
	idle = append(idle, dial("127.0.0.2")) // the fourth in all
	waitFor(t, func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return len(ln.pending) == 4 })
	if !closedSoon("127.0.0.3") {
		t.Fatal("a fifth half-open connection was kept")
	}
	if n := ln.Refused(); n != 2 {
		t.Fatalf("Refused() = %d, want 2", n)
	}
	for _, c := range idle {
		c.Close()
	}
	waitFor(t, func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return len(ln.pending) == 0 && len(ln.perPeer) == 0 })
	connectVia(t, ln, ini, resp, ConnConfig{})
	ping(t, ini, resp, 1)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
