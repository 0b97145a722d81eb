package iwarp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// The receiver's DDP/RDMAP core driven with no socket, no lower layer and
// no goroutine: each test hands it DDP Segments as a lower layer would
// (start, data, end; or dest and placedDirect for a direct read) and looks
// at the memory, the completion queues and the errors it gives.

// coreEnd is a QP with a registered buffer and the receiver core of a conn
// that never started.
func coreEnd(t *testing.T) (*end, *rx) {
	t.Helper()
	e := newSizedEnd(t, "core", nil, 1<<20)
	c := newConn(e.qp, nil, mpa.Negotiated{Role: mpa.Responder, IRD: 4, ORD: 4, CRC: true})
	r := newRx(c)
	t.Cleanup(r.close)
	return e, r
}

func taggedSeg(t *testing.T, op rdmap.Opcode, stag mem.STag, to uint64, last bool, payload []byte) []byte {
	t.Helper()
	f, err := rdmap.TaggedFields(op, uint32(stag), to)
	if err != nil {
		t.Fatal(err)
	}
	f.Last = last
	b := make([]byte, ddp.TaggedHeaderLen, ddp.TaggedHeaderLen+len(payload))
	f.Encode(b)
	return append(b, payload...)
}

func sendSeg(t *testing.T, op rdmap.Opcode, msn, mo uint32, inv mem.STag, last bool, payload []byte) []byte {
	t.Helper()
	f, err := rdmap.UntaggedFields(op, msn, uint32(inv))
	if err != nil {
		t.Fatal(err)
	}
	f.Last, f.MO = last, mo
	b := make([]byte, ddp.UntaggedHeaderLen, ddp.UntaggedHeaderLen+len(payload))
	f.Encode(b)
	return append(b, payload...)
}

// deliver hands seg to the core in pieces of at most chunk octets, as a
// stream lower layer does, and ends it.
func deliver(r *rx, seg []byte, chunk int) error {
	r.start(len(seg))
	for len(seg) > 0 {
		n := min(chunk, len(seg))
		if err := r.data(seg[:n]); err != nil {
			return err
		}
		seg = seg[n:]
	}
	return r.end()
}

func TestRxCoreWritePlaces(t *testing.T) {
	for _, chunk := range []int{1, 7, 1 << 20} {
		e, r := coreEnd(t)
		payload := bytes.Repeat([]byte("ddp"), 1000)
		if err := deliver(r, taggedSeg(t, rdmap.OpWrite, e.mr.STag(), e.mr.BaseTO()+4096, true, payload), chunk); err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if !bytes.Equal(e.buf[4096:4096+len(payload)], payload) {
			t.Fatalf("chunk %d: payload not placed at TO 4096", chunk)
		}
		if e.buf[4095] != 0 || e.buf[4096+len(payload)] != 0 {
			t.Fatalf("chunk %d: octets placed outside the segment's range", chunk)
		}
		if n := e.rcq.Poll(e.wcs[:]); n != 0 {
			t.Fatalf("chunk %d: an RDMA Write completed %d receives", chunk, n)
		}
	}
}

// A lower layer that reads payload straight into place asks the core where
// it goes once the header is in, and reports what it put there.
func TestRxCoreDirectPlacement(t *testing.T) {
	e, r := coreEnd(t)
	payload := bytes.Repeat([]byte{0xa5}, 3000)
	seg := taggedSeg(t, rdmap.OpWrite, e.mr.STag(), e.mr.BaseTO()+100, true, payload)
	r.start(len(seg))
	if dst := r.dest(); dst != nil {
		t.Fatalf("dest before the header: %d octets", len(dst))
	}
	if err := r.data(seg[:ddp.TaggedHeaderLen+10]); err != nil {
		t.Fatal(err)
	}
	dst := r.dest()
	if len(dst) != len(payload)-10 || &dst[0] != &e.buf[110] {
		t.Fatalf("dest is %d octets, want %d at offset 110", len(dst), len(payload)-10)
	}
	copy(dst, payload[10:])
	if err := r.placedDirect(len(dst)); err != nil {
		t.Fatal(err)
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.buf[100:100+len(payload)], payload) {
		t.Fatal("payload not in place")
	}
}

// Sends complete their receives in MSN order, with the length of the whole
// message, however it was segmented.
func TestRxCoreSendsCompleteInOrder(t *testing.T) {
	e, r := coreEnd(t)
	for i := range 2 {
		if err := e.qp.PostRecv(&RecvWR{ID: uint64(10 + i), SGL: []SGE{e.sge(i*8192, 8192)}}); err != nil {
			t.Fatal(err)
		}
	}
	msg := bytes.Repeat([]byte("send"), 1500) // 6000 octets in two segments
	if err := deliver(r, sendSeg(t, rdmap.OpSend, 1, 0, 0, false, msg[:4000]), 512); err != nil {
		t.Fatal(err)
	}
	if n := e.rcq.Poll(e.wcs[:]); n != 0 {
		t.Fatal("a receive completed before its message's last segment")
	}
	if err := deliver(r, sendSeg(t, rdmap.OpSendSE, 1, 4000, 0, true, msg[4000:]), 512); err != nil {
		t.Fatal(err)
	}
	if err := deliver(r, sendSeg(t, rdmap.OpSend, 2, 0, 0, true, []byte("second")), 512); err != nil {
		t.Fatal(err)
	}
	got := e.wcs[:e.rcq.Poll(e.wcs[:])]
	if len(got) != 2 || got[0].WRID != 10 || got[0].ByteLen != 6000 || !got[0].Solicited ||
		got[1].WRID != 11 || got[1].ByteLen != 6 || got[1].Solicited {
		t.Fatalf("receive completions %+v", got)
	}
	if !bytes.Equal(e.buf[:6000], msg) || string(e.buf[8192:8198]) != "second" {
		t.Fatal("Send payloads not in their receive buffers")
	}
}

// A Send with Invalidate invalidates the STag it names before its receive
// completes, and the completion says which.
func TestRxCoreSendWithInvalidate(t *testing.T) {
	e, r := coreEnd(t)
	m, err := mem.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	victim, err := e.dev.Register(e.pd, m, 0, 4096, mem.LocalWrite|mem.RemoteWrite|mem.RemoteInvalidate)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostRecv(&RecvWR{ID: 1, SGL: []SGE{e.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := deliver(r, sendSeg(t, rdmap.OpSendInvalidate, 1, 0, victim.STag(), true, []byte("done")), 64); err != nil {
		t.Fatal(err)
	}
	got := e.wcs[:e.rcq.Poll(e.wcs[:])]
	if len(got) != 1 || got[0].Invalidated != victim.STag() {
		t.Fatalf("completions %+v, want one that invalidated %#x", got, uint32(victim.STag()))
	}
	// A Write to the invalidated STag is now the peer's error.
	err = deliver(r, taggedSeg(t, rdmap.OpWrite, victim.STag(), victim.BaseTO(), true, []byte("late")), 64)
	var pe *protoError
	if !errors.As(err, &pe) || pe.err.Layer != rdmap.LayerDDP {
		t.Fatalf("Write to an invalidated STag: %v, want a DDP tagged-buffer error", err)
	}
}

// What the peer gets wrong is a protoError carrying the RFC's error, for
// the Terminate; nothing of the bad segment is placed.
func TestRxCoreRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  func(e *end) []byte
		want rdmap.Error
	}{
		{"write to an unknown STag", func(e *end) []byte {
			return taggedSeg(t, rdmap.OpWrite, e.mr.STag()+0x100, 0, true, []byte("x"))
		}, rdmap.FromDDP(ddp.ErrInvalidSTag)},
		{"write past the region", func(e *end) []byte {
			return taggedSeg(t, rdmap.OpWrite, e.mr.STag(), e.mr.BaseTO()+1<<20-1, true, []byte("xy"))
		}, rdmap.FromDDP(ddp.ErrBaseBounds)},
		{"Read Response with no Read outstanding", func(e *end) []byte {
			return taggedSeg(t, rdmap.OpReadResponse, e.mr.STag(), 0, true, []byte("x"))
		}, rdmap.ErrUnexpectedOpcode},
		{"Send with no receive posted", func(e *end) []byte {
			return sendSeg(t, rdmap.OpSend, 1, 0, 0, true, []byte("x"))
		}, rdmap.FromDDP(ddp.ErrMSNNoBuffer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, r := coreEnd(t)
			err := deliver(r, tc.seg(e), 1<<20)
			var pe *protoError
			if !errors.As(err, &pe) || pe.err != tc.want {
				t.Fatalf("got %v, want a protocol error %v", err, tc.want)
			}
			if !bytes.Equal(e.buf[:16], make([]byte, 16)) {
				t.Fatal("the bad segment's payload was placed")
			}
		})
	}
}

// An RDMA Read completes when the last octet of its Response is placed,
// and the Response must continue exactly where the Read stands.
func TestRxCoreReadResponse(t *testing.T) {
	e, r := coreEnd(t)
	c := r.c
	w := sendWQE{id: 77, op: OpRead, length: 8}
	idx := e.qp.takeInflight(&w)
	to := e.mr.BaseTO() + 64
	c.reads[0] = outRead{sink: e.mr.STag(), sinkTO: to, size: 8, wr: idx}
	c.readTl.Store(1)
	if err := deliver(r, taggedSeg(t, rdmap.OpReadResponse, e.mr.STag(), to, false, []byte("rdma")), 3); err != nil {
		t.Fatal(err)
	}
	if n := e.scq.Poll(e.wcs[:]); n != 0 {
		t.Fatal("the Read completed before its last Response segment")
	}
	err := deliver(r, taggedSeg(t, rdmap.OpReadResponse, e.mr.STag(), to, true, []byte("read")), 3)
	var pe *protoError
	if !errors.As(err, &pe) {
		t.Fatalf("a Response segment that repeats an offset: %v, want a protocol error", err)
	}
	if err := deliver(r, taggedSeg(t, rdmap.OpReadResponse, e.mr.STag(), to+4, true, []byte("read")), 3); err != nil {
		t.Fatal(err)
	}
	got := e.wcs[:e.scq.Poll(e.wcs[:])]
	if len(got) != 1 || got[0].WRID != 77 || got[0].Status != StatusSuccess || string(e.buf[64:72]) != "rdmaread" {
		t.Fatalf("completions %+v, buffer %q", got, e.buf[64:72])
	}
	if c.readHead.Load() != 1 {
		t.Fatal("the ORD slot was not freed")
	}
}

// A Verified region gets a tagged segment's payload only at the segment's
// end, which the lower layer reaches once the FPDU's CRC has checked: a
// segment cut short (a CRC error ends the stream before end) leaves it as
// it was, whether its payload came through data or a direct read.
func TestRxCoreVerifiedPlacesAtEnd(t *testing.T) {
	e, r := coreEnd(t)
	mr := e.register(mem.PD{}, 64<<10, mem.LocalWrite|mem.RemoteWrite|mem.Verified)
	region := mr.Bytes()
	payload := bytes.Repeat([]byte("verified"), 1000)
	seg := taggedSeg(t, rdmap.OpWrite, mr.STag(), mr.BaseTO()+512, true, payload)

	// Through data, then cut short.
	r.start(len(seg))
	if err := r.data(seg[:len(seg)-1]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(region, make([]byte, len(region))) {
		t.Fatal("a Verified region changed before its segment's end")
	}
	r.start(0) // the next FPDU: the cut segment is forgotten
	if !bytes.Equal(region, make([]byte, len(region))) {
		t.Fatal("a Verified region changed by a segment that never ended")
	}

	// Through a direct read: dest is not the region.
	r.start(len(seg))
	if err := r.data(seg[:ddp.TaggedHeaderLen]); err != nil {
		t.Fatal(err)
	}
	dst := r.dest()
	if len(dst) != len(payload) || &dst[0] == &region[512] {
		t.Fatalf("dest is %d octets (want %d) and the region itself %v", len(dst), len(payload), &dst[0] == &region[512])
	}
	copy(dst, payload)
	if err := r.placedDirect(len(dst)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(region, make([]byte, len(region))) {
		t.Fatal("a Verified region changed before its segment's end")
	}
	if err := r.end(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(region[512:512+len(payload)], payload) || region[511] != 0 || region[512+len(payload)] != 0 {
		t.Fatal("the verified segment is not exactly in place after its end")
	}

	// The same through data in small pieces, at another TO.
	seg = taggedSeg(t, rdmap.OpWrite, mr.STag(), mr.BaseTO()+32768, true, payload)
	if err := deliver(r, seg, 7); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(region[32768:32768+len(payload)], payload) {
		t.Fatal("segment delivered in pieces not in place")
	}
}
