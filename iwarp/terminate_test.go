package iwarp

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// ping sends a short message from a to b and waits for both completions.
func ping(t testing.TB, a, b *end, id uint64) {
	t.Helper()
	if err := b.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{b.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(&SendWR{ID: id, Op: OpSend, SGL: []SGE{a.sge(0, 8)}}); err != nil {
		t.Fatal(err)
	}
	a.expect(a.scq, id, WCSend, StatusSuccess, 8)
	b.expect(b.rcq, id, WCRecv, StatusSuccess, 8)
}

// Each protocol error that one engine detects in what the other sent: the
// detecting side sends the Terminate that names it, the sender receives it,
// both QPs reach StateError and every outstanding work request completes
// exactly once, the faulty RDMA Read with a remote error status and the
// rest flushed. Run in both directions, after traffic has flowed (so the
// Responder is past RFC 5044 7.1.2 rule 4).
func TestTerminateCodes(t *testing.T) {
	const size, n = 1 << 20, 4096
	type setup struct {
		src, dst *end
		wr       SendWR // the faulty request, ID 1
	}
	cases := []struct {
		name string
		// bad fills in the faulty request that src posts toward dst.
		bad  func(s *setup)
		want rdmap.Error
		// badSt is the status the faulty request completes with at src: a
		// Write or Send completed when it was sent.
		badSt Status
		// dstRecv is the status of dst's posted receive; noRecv: none.
		dstRecv Status
		noRecv  bool
	}{
		{name: "write/invalid-stag", want: rdmap.FromDDP(ddp.ErrInvalidSTag), bad: func(s *setup) {
			s.wr = SendWR{Op: OpWrite, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: s.dst.mr.STag() ^ 0x5a, RemoteTO: s.dst.mr.BaseTO()}
		}},
		{name: "write/base-bounds", want: rdmap.FromDDP(ddp.ErrBaseBounds), bad: func(s *setup) {
			s.wr = SendWR{Op: OpWrite, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: s.dst.mr.STag(), RemoteTO: s.dst.mr.BaseTO() + size - n/2}
		}},
		{name: "write/other-pd", want: rdmap.FromDDP(ddp.ErrSTagNotAssociated), bad: func(s *setup) {
			mr := s.dst.register(s.dst.dev.AllocPD(), 64<<10, mem.LocalWrite|mem.RemoteWrite)
			s.wr = SendWR{Op: OpWrite, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: mr.STag(), RemoteTO: mr.BaseTO()}
		}},
		{name: "write/to-wrap", want: rdmap.FromDDP(ddp.ErrTOWrap), bad: func(s *setup) {
			s.wr = SendWR{Op: OpWrite, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: s.dst.mr.STag(), RemoteTO: math.MaxUint64 - 100}
		}},
		{name: "write/no-remote-write", want: rdmap.ErrAccessRights, bad: func(s *setup) {
			mr := s.dst.register(mem.PD{}, 64<<10, mem.LocalWrite|mem.RemoteRead)
			s.wr = SendWR{Op: OpWrite, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: mr.STag(), RemoteTO: mr.BaseTO()}
		}},
		{name: "read/no-remote-read", want: rdmap.ErrAccessRights, badSt: StatusRemoteAccess, bad: func(s *setup) {
			mr := s.dst.register(mem.PD{}, 64<<10, mem.LocalWrite|mem.RemoteWrite)
			s.wr = SendWR{Op: OpRead, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: mr.STag(), RemoteTO: mr.BaseTO()}
		}},
		{name: "read/invalid-stag", want: rdmap.ErrInvalidSTag, badSt: StatusRemoteAccess, bad: func(s *setup) {
			s.wr = SendWR{Op: OpRead, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: s.dst.mr.STag() ^ 0x5a, RemoteTO: s.dst.mr.BaseTO()}
		}},
		{name: "read/other-pd", want: rdmap.ErrSTagNotAssociated, badSt: StatusRemoteAccess, bad: func(s *setup) {
			mr := s.dst.register(s.dst.dev.AllocPD(), 64<<10, mem.LocalWrite|mem.RemoteRead)
			s.wr = SendWR{Op: OpRead, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: mr.STag(), RemoteTO: mr.BaseTO()}
		}},
		{name: "read/base-bounds", want: rdmap.ErrBaseBounds, badSt: StatusRemoteAccess, bad: func(s *setup) {
			s.wr = SendWR{Op: OpRead, SGL: []SGE{s.src.sge(0, n)}, RemoteSTag: s.dst.mr.STag(), RemoteTO: s.dst.mr.BaseTO() + size - 1}
		}},
		{name: "send/no-receive", want: rdmap.FromDDP(ddp.ErrMSNNoBuffer), noRecv: true, bad: func(s *setup) {
			s.wr = SendWR{Op: OpSend, SGL: []SGE{s.src.sge(0, n)}}
		}},
		{name: "send/too-long", want: rdmap.FromDDP(ddp.ErrMessageTooLong), dstRecv: StatusLocalLength, bad: func(s *setup) {
			s.wr = SendWR{Op: OpSend, SGL: []SGE{s.src.sge(0, n+1)}}
		}},
		{name: "send-inv/other-pd", want: rdmap.ErrProtectionCannotInvalidate, bad: func(s *setup) {
			mr := s.dst.register(s.dst.dev.AllocPD(), 64<<10, mem.LocalWrite|mem.RemoteWrite|mem.RemoteInvalidate)
			s.wr = SendWR{Op: OpSendInv, SGL: []SGE{s.src.sge(0, 16)}, InvalidateSTag: mr.STag()}
		}},
		{name: "send-inv/not-remotely-invalidatable", want: rdmap.ErrOperationCannotInvalidate, bad: func(s *setup) {
			mr := s.dst.register(mem.PD{}, 64<<10, mem.LocalWrite|mem.RemoteWrite)
			s.wr = SendWR{Op: OpSendSEInv, SGL: []SGE{s.src.sge(0, 16)}, InvalidateSTag: mr.STag()}
		}},
		{name: "send-inv/invalid-stag", want: rdmap.ErrInvalidSTag, bad: func(s *setup) {
			s.wr = SendWR{Op: OpSendInv, SGL: []SGE{s.src.sge(0, 16)}, InvalidateSTag: s.dst.mr.STag() ^ 0x5a}
		}},
	}
	for _, tc := range cases {
		for _, dir := range []string{"initiator-sends", "responder-sends"} {
			t.Run(tc.name+"/"+dir, func(t *testing.T) {
				ini, resp := pair(t, size, ConnConfig{}, ConnConfig{})
				src, dst := ini, resp
				if dir == "responder-sends" {
					src, dst = resp, ini
				}
				ping(t, ini, resp, 50)
				ping(t, resp, ini, 51)
				s := &setup{src: src, dst: dst}
				tc.bad(s)
				s.wr.ID = 1
				if err := src.qp.PostRecv(&RecvWR{ID: 200, SGL: []SGE{src.sge(0, 64)}}); err != nil {
					t.Fatal(err)
				}
				dstRecvs := map[uint64]Status{}
				if !tc.noRecv {
					if err := dst.qp.PostRecv(&RecvWR{ID: 100, SGL: []SGE{dst.sge(size/2, n)}}); err != nil {
						t.Fatal(err)
					}
					dstRecvs[100] = StatusFlushed
					if tc.dstRecv != StatusSuccess {
						dstRecvs[100] = tc.dstRecv
					}
				}
				if err := src.qp.PostSend(&s.wr); err != nil {
					t.Fatal(err)
				}
				// Posted after the faulty request: never answered, flushed.
				// (Refused when the Terminate has come back already.)
				srcSends := map[uint64]Status{1: tc.badSt, 2: StatusFlushed}
				if err := src.qp.PostSend(&SendWR{ID: 2, Op: OpRead, SGL: []SGE{src.sge(size/2, 16)},
					RemoteSTag: dst.mr.STag(), RemoteTO: dst.mr.BaseTO()}); errors.Is(err, ErrQPState) {
					delete(srcSends, 2)
				} else if err != nil {
					t.Fatal(err)
				}
				waitDone(t, "detecting side", dst.qp)
				waitDone(t, "sending side", src.qp)
				terminateErr(t, "detecting side", dst.qp, false, tc.want)
				terminateErr(t, "sending side", src.qp, true, tc.want)
				expectWCs(t, "sending side, send queue", collect(t, src.scq), srcSends)
				expectWCs(t, "sending side, receive queue", collect(t, src.rcq), map[uint64]Status{200: StatusFlushed})
				expectWCs(t, "detecting side, receive queue", collect(t, dst.rcq), dstRecvs)
				expectWCs(t, "detecting side, send queue", collect(t, dst.scq), nil)
				if err := src.qp.PostSend(&SendWR{ID: 3, Op: OpSend}); err == nil {
					t.Error("PostSend succeeded on a QP in the error state")
				}
				if err := dst.qp.PostRecv(&RecvWR{ID: 3}); err == nil {
					t.Error("PostRecv succeeded on a QP in the error state")
				}
			})
		}
	}
}

// A valid Send with Invalidate invalidates the STag and says so in the
// receive's completion (the positive case of the send-inv cases above).
func TestSendWithInvalidate(t *testing.T) {
	ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
	mr := resp.register(mem.PD{}, 64<<10, mem.LocalWrite|mem.RemoteWrite|mem.RemoteInvalidate)
	if err := resp.qp.PostRecv(&RecvWR{ID: 7, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := ini.qp.PostSend(&SendWR{ID: 1, Op: OpSendSEInv, SGL: []SGE{ini.sge(0, 16)}, InvalidateSTag: mr.STag()}); err != nil {
		t.Fatal(err)
	}
	ini.expect(ini.scq, 1, WCSend, StatusSuccess, 16)
	wc := resp.expect(resp.rcq, 7, WCRecv, StatusSuccess, 16)
	if wc.Invalidated != mr.STag() || !wc.Solicited {
		t.Fatalf("completion %+v, want Invalidated %v and Solicited", wc, mr.STag())
	}
	if mr.Valid() {
		t.Fatal("the STag is still valid after the Send with Invalidate")
	}
	// The peer can no longer write through it: invalid STag.
	if err := ini.qp.PostSend(&SendWR{ID: 2, Op: OpWrite, SGL: []SGE{ini.sge(0, 16)}, RemoteSTag: mr.STag(), RemoteTO: mr.BaseTO()}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "responder", resp.qp)
	terminateErr(t, "responder", resp.qp, false, rdmap.FromDDP(ddp.ErrInvalidSTag))
}

// Protocol errors only a hand-driven peer can commit: the engine answers
// each with the Terminate that names it, which the raw peer reads as the
// last message of the stream, and fails its QP with it.
func TestTerminateRawPeer(t *testing.T) {
	const size = 1 << 20
	type rawCase struct {
		name string
		// recvs is how many receives the engine posts (IDs 100, 101, ...).
		recvs int
		// send writes the offending octets; it returns the DDP header the
		// Terminate must carry, or nil when it must carry none.
		send func(p *rawPeer, e *end) ddp.Header
		want rdmap.Error
	}
	badDV := func(h []byte, dv byte) []byte { h[0] = h[0]&^3 | dv; return h }
	badRV := func(h []byte) []byte { h[1] = 2<<6 | h[1]&0x0f; return h }
	cases := []rawCase{
		{name: "msn-out-of-range", recvs: 2, want: rdmap.FromDDP(ddp.ErrMSNRange), send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 5, 0, 0, true)
			p.send(h, make([]byte, 16))
			return h
		}},
		{name: "msn-out-of-range/zero-length", recvs: 2, want: rdmap.FromDDP(ddp.ErrMSNRange), send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 3, 0, 0, true)
			p.send(h, nil)
			return h
		}},
		{name: "msn-already-used", recvs: 2, want: rdmap.FromDDP(ddp.ErrMSNRange), send: func(p *rawPeer, e *end) ddp.Header {
			p.send(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), make([]byte, 8))
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true)
			p.send(h, make([]byte, 8))
			return h
		}},
		{name: "no-buffer/zero-length", want: rdmap.FromDDP(ddp.ErrMSNNoBuffer), send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true)
			p.send(h, nil)
			return h
		}},
		{name: "invalid-mo", recvs: 1, want: rdmap.FromDDP(ddp.ErrInvalidMO), send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 256, 0, true)
			p.send(h, make([]byte, 8))
			return h
		}},
		{name: "crc/payload", recvs: 1, want: rdmap.FromMPA(uint8(mpa.CodeCRC)), send: func(p *rawPeer, e *end) ddp.Header {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), bytes.Repeat([]byte{7}, 64))
			b[2+ddp.UntaggedHeaderLen+10] ^= 1
			p.write(b)
			return nil
		}},
		{name: "crc/crc-field", recvs: 1, want: rdmap.FromMPA(uint8(mpa.CodeCRC)), send: func(p *rawPeer, e *end) ddp.Header {
			b := p.fpdu(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), bytes.Repeat([]byte{7}, 64))
			b[len(b)-1] ^= 0x80
			p.write(b)
			return nil
		}},
		{name: "crc/header", recvs: 1, want: rdmap.FromMPA(uint8(mpa.CodeCRC)), send: func(p *rawPeer, e *end) ddp.Header {
			// A corrupted STag: the header breaks a DDP rule, but its CRC
			// says it was not what the peer sent, so the CRC error is what
			// is reported (the header is not validated before its CRC).
			b := p.fpdu(taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true), bytes.Repeat([]byte{7}, 3000))
			b[2+2] ^= 0x10
			p.write(b)
			return nil
		}},
		{name: "ddp-version/tagged", want: rdmap.FromDDP(ddp.ErrTaggedVersion), send: func(p *rawPeer, e *end) ddp.Header {
			p.send(badDV(taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true), 2), make([]byte, 64))
			return nil
		}},
		{name: "ddp-version/untagged", recvs: 1, want: rdmap.FromDDP(ddp.ErrUntaggedVersion), send: func(p *rawPeer, e *end) ddp.Header {
			p.send(badDV(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true), 0), make([]byte, 64))
			return nil
		}},
		{name: "ddp-version/terminate", want: rdmap.FromDDP(ddp.ErrUntaggedVersion), send: func(p *rawPeer, e *end) ddp.Header {
			b := make([]byte, rdmap.MaxTerminateLen)
			n, _ := rdmap.NewTerminate(rdmap.ErrCatastrophicStream, nil, 0, nil).Encode(b)
			p.send(badDV(untaggedHdr(rdmap.OpTerminate, rdmap.QNTerminate, 1, 0, 0, true), 3), b[:n])
			return nil
		}},
		{name: "rdmap-version", recvs: 1, want: rdmap.ErrInvalidVersion, send: func(p *rawPeer, e *end) ddp.Header {
			h := badRV(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true))
			p.send(h, make([]byte, 64))
			return h
		}},
		{name: "opcode/send-on-read-queue", recvs: 1, want: rdmap.ErrUnexpectedOpcode, send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNReadRequest, 1, 0, 0, true)
			p.send(h, make([]byte, 28))
			return h
		}},
		{name: "opcode/write-untagged", recvs: 1, want: rdmap.ErrUnexpectedOpcode, send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true)
			h[1] = uint8(rdmap.MakeControl(rdmap.OpWrite))
			p.send(h, make([]byte, 64))
			return h
		}},
		{name: "opcode/reserved", recvs: 1, want: rdmap.ErrUnexpectedOpcode, send: func(p *rawPeer, e *end) ddp.Header {
			h := taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true)
			h[1] = uint8(rdmap.MakeControl(0x8))
			p.send(h, make([]byte, 64))
			return h
		}},
		{name: "opcode/read-response-unrequested", want: rdmap.ErrUnexpectedOpcode, send: func(p *rawPeer, e *end) ddp.Header {
			h := taggedHdr(rdmap.OpReadResponse, uint32(e.mr.STag()), e.mr.BaseTO(), true)
			p.send(h, make([]byte, 64))
			return h
		}},
		{name: "invalid-qn", recvs: 1, want: rdmap.FromDDP(ddp.ErrInvalidQN), send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpSend, 3, 1, 0, 0, true)
			p.send(h, make([]byte, 64))
			return h
		}},
		{name: "short-segment/tagged", want: rdmap.FromDDP(ddp.ErrLocalCatastrophic), send: func(p *rawPeer, e *end) ddp.Header {
			// ULPDU_Length 10: shorter than the 14-octet header its T bit
			// announces.
			p.send(taggedHdr(rdmap.OpWrite, uint32(e.mr.STag()), e.mr.BaseTO(), true)[:10], nil)
			return nil
		}},
		{name: "short-segment/untagged", recvs: 1, want: rdmap.FromDDP(ddp.ErrLocalCatastrophic), send: func(p *rawPeer, e *end) ddp.Header {
			p.send(untaggedHdr(rdmap.OpSend, rdmap.QNSend, 1, 0, 0, true)[:17], nil)
			return nil
		}},
		{name: "short-segment/empty", want: rdmap.FromDDP(ddp.ErrLocalCatastrophic), send: func(p *rawPeer, e *end) ddp.Header {
			p.send(nil, nil)
			return nil
		}},
		{name: "read-request/wrong-length", want: rdmap.ErrOperationUnspecified, send: func(p *rawPeer, e *end) ddp.Header {
			h := untaggedHdr(rdmap.OpReadRequest, rdmap.QNReadRequest, 1, 0, 0, true)
			p.send(h, make([]byte, 20))
			return h
		}},
		{name: "read-request/msn", want: rdmap.FromDDP(ddp.ErrMSNRange), send: func(p *rawPeer, e *end) ddp.Header {
			b := readRequestHdr(7, rdmap.ReadRequestFields{Size: 8, SrcSTag: uint32(e.mr.STag()), SrcTO: e.mr.BaseTO()})
			p.send(b, nil)
			return ddp.Header(b[:ddp.UntaggedHeaderLen])
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, p := rawPair(t, size, ConnConfig{}, rawConfig, 0)
			want := map[uint64]Status{}
			for i := range tc.recvs {
				id := uint64(100 + i)
				if err := e.qp.PostRecv(&RecvWR{ID: id, SGL: []SGE{e.sge(i*1024, 256)}}); err != nil {
					t.Fatal(err)
				}
				want[id] = StatusFlushed
			}
			if tc.name == "msn-already-used" {
				want[100] = StatusSuccess
			}
			if tc.name == "invalid-mo" {
				want[100] = StatusLocalLength
			}
			hdr := tc.send(p, e)
			term, _ := p.readTerminate()
			if got := term.Err(); got != tc.want {
				t.Fatalf("Terminate reports %v, want %v", got, tc.want)
			}
			if hdr == nil {
				if term.D() {
					t.Errorf("Terminate carries a DDP header % x", term.DDPHeader())
				}
			} else if d := term.DDPHeader(); !bytes.Equal(d, hdr[:hdr.Len()]) {
				t.Errorf("terminated DDP header % x, want % x", []byte(d), []byte(hdr[:hdr.Len()]))
			}
			p.c.Close()
			waitDone(t, "engine", e.qp)
			terminateErr(t, "engine", e.qp, false, tc.want)
			expectWCs(t, "engine, receive queue", collect(t, e.rcq), want)
		})
	}
}

// A Terminate from the peer that names an RDMA Read Request fails that
// Read, found by its MSN, with a remote error; Reads before it whose
// Responses never came are flushed.
func TestTerminateNamesRead(t *testing.T) {
	e, p := rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
	// Let the Responder send (RFC 5044 7.1.2 rule 4).
	p.send(taggedHdr(rdmap.OpWrite, 0, 0, true), nil)
	for id := uint64(1); id <= 3; id++ {
		if err := e.qp.PostSend(&SendWR{ID: id, Op: OpRead, SGL: []SGE{e.sge(int(id)*4096, 100)}, RemoteSTag: 0x1234, RemoteTO: id}); err != nil {
			t.Fatal(err)
		}
	}
	var reqs [][]byte
	for len(reqs) < 3 {
		seg, err := p.next()
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, seg)
	}
	// Terminate the second: a Remote Protection Error with its headers.
	h, _, err := ddp.Parse(reqs[1])
	if err != nil || h.Tagged() || h.QN() != rdmap.QNReadRequest || h.MSN() != 2 {
		t.Fatalf("second segment % x: %v", reqs[1], err)
	}
	b := make([]byte, rdmap.MaxTerminateLen)
	n, err := rdmap.NewTerminate(rdmap.ErrBaseBounds, h, uint16(len(reqs[1])), rdmap.ReadRequest(reqs[1][ddp.UntaggedHeaderLen:])).Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	p.send(untaggedHdr(rdmap.OpTerminate, rdmap.QNTerminate, 1, 0, 0, true), b[:n])
	waitDone(t, "engine", e.qp)
	terminateErr(t, "engine", e.qp, true, rdmap.ErrBaseBounds)
	expectWCs(t, "engine", collect(t, e.scq), map[uint64]Status{1: StatusFlushed, 2: StatusRemoteAccess, 3: StatusFlushed})
}

// A peer that has more RDMA Read Requests outstanding than the IRD the
// engine stated (revision 1: the configured value) is terminated with the
// Read Request queue's "MSN range is not valid". The raw peer does not read
// until then, so a Read Response the sender begins stays stuck on its full
// receive window. An IRD slot is free again once its Response is framed,
// so with an IRD of 2 the third Request is refused if the sender has not
// begun the first Response yet, else the fourth. Then the raw peer drains:
// the Response under way, if any, is finished before the Terminate.
func TestTerminateIRDExceeded(t *testing.T) {
	const size = 16 << 20
	rcfg := ConnConfig{}
	rcfg.MPA.Revision, rcfg.MPA.IRD, rcfg.MPA.ORD = 1, 2, 2
	e, p := rawPair(t, size, rcfg, mpa.StartupConfig{Revision: 1}, 32<<10)
	if c := e.qp.conn; len(c.resps) != 2 {
		t.Fatalf("engine IRD %d, want 2", len(c.resps))
	}
	if err := e.qp.PostRecv(&RecvWR{ID: 100, SGL: []SGE{e.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	var reqs []byte
	for msn := uint32(1); msn <= 4; msn++ {
		reqs = append(reqs, p.fpdu(readRequestHdr(msn, rdmap.ReadRequestFields{
			SinkSTag: 0x4242, SinkTO: uint64(msn) << 32, Size: size / 2,
			SrcSTag: uint32(e.mr.STag()), SrcTO: e.mr.BaseTO(),
		}), nil)...)
	}
	p.write(reqs)
	deadline := time.Now().Add(testTimeout)
	for e.qp.State() == StateRTS {
		if time.Now().After(deadline) {
			c := e.qp.conn
			t.Fatalf("the engine did not detect the IRD overrun: %d Requests taken, %d answered", c.respTl.Load(), c.respHead.Load())
		}
		time.Sleep(time.Millisecond)
	}
	term, st := p.readTerminate()
	if want := rdmap.FromDDP(ddp.ErrMSNRange); term.Err() != want {
		t.Fatalf("Terminate reports %v, want %v", term.Err(), want)
	}
	d := term.DDPHeader()
	if d == nil || d.Tagged() || d.QN() != rdmap.QNReadRequest || d.MSN() < 3 {
		t.Fatalf("terminated DDP header % x, want the third or fourth Read Request's", []byte(d))
	}
	switch {
	case st.readRespData != 0 && st.readRespData != size/2:
		t.Errorf("%d octets of Read Response before the Terminate, want 0 or the first Response's %d", st.readRespData, size/2)
	case d.MSN() == 4 && st.readRespData != size/2:
		t.Errorf("the fourth Request was refused, but %d octets of the first Response came first, not %d", st.readRespData, size/2)
	}
	p.c.Close()
	waitDone(t, "engine", e.qp)
	terminateErr(t, "engine", e.qp, false, rdmap.FromDDP(ddp.ErrMSNRange))
	expectWCs(t, "engine", collect(t, e.rcq), map[uint64]Status{100: StatusFlushed})
}

// One QP's Terminate leaves the other QPs of the same Listener and Device
// working, and the Listener keeps accepting.
func TestTerminateIsolation(t *testing.T) {
	const size = 1 << 20
	dev := NewDevice(0)
	ln := listen(t, dev, ConnConfig{})
	victimR, survivorR := newSizedEnd(t, "victim responder", dev, size), newSizedEnd(t, "survivor responder", dev, size)
	victimI, survivorI := newSizedEnd(t, "victim initiator", nil, size), newSizedEnd(t, "survivor initiator", nil, size)
	connectVia(t, ln, victimI, victimR, ConnConfig{})
	connectVia(t, ln, survivorI, survivorR, ConnConfig{})
	traffic := func(id uint64) {
		ping(t, survivorI, survivorR, id)
		ping(t, survivorR, survivorI, id+1)
		fill(survivorI.buf[:4096], byte(id))
		if err := survivorI.qp.PostSend(&SendWR{ID: id + 2, Op: OpWrite, SGL: []SGE{survivorI.sge(0, 4096)},
			RemoteSTag: survivorR.mr.STag(), RemoteTO: survivorR.mr.BaseTO() + 8192}); err != nil {
			t.Fatal(err)
		}
		if err := survivorI.qp.PostSend(&SendWR{ID: id + 3, Op: OpRead, SGL: []SGE{survivorI.sge(16384, 4096)},
			RemoteSTag: survivorR.mr.STag(), RemoteTO: survivorR.mr.BaseTO() + 8192}); err != nil {
			t.Fatal(err)
		}
		survivorI.expect(survivorI.scq, id+2, WCWrite, StatusSuccess, 4096)
		survivorI.expect(survivorI.scq, id+3, WCRead, StatusSuccess, 4096)
		if !bytes.Equal(survivorI.buf[16384:16384+4096], survivorI.buf[:4096]) {
			t.Fatal("RDMA Read returned other data")
		}
	}
	traffic(10)
	// The victim writes to an STag the survivor's responder registered:
	// same Device, another PD.
	if err := victimI.qp.PostSend(&SendWR{ID: 1, Op: OpWrite, SGL: []SGE{victimI.sge(0, 64)},
		RemoteSTag: survivorR.mr.STag(), RemoteTO: survivorR.mr.BaseTO()}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "victim responder", victimR.qp)
	waitDone(t, "victim initiator", victimI.qp)
	terminateErr(t, "victim responder", victimR.qp, false, rdmap.FromDDP(ddp.ErrSTagNotAssociated))
	if s := survivorR.qp.State(); s != StateRTS || survivorI.qp.State() != StateRTS {
		t.Fatalf("survivor in state %v / %v", s, survivorI.qp.State())
	}
	traffic(20)
	// A new connection on the same Listener and Device.
	lateR, lateI := newSizedEnd(t, "late responder", dev, size), newSizedEnd(t, "late initiator", nil, size)
	connectVia(t, ln, lateI, lateR, ConnConfig{})
	ping(t, lateI, lateR, 30)
	ping(t, lateR, lateI, 31)
	traffic(40)
}
