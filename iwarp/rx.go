package iwarp

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// maxCtlPayload bounds the untagged control payloads (Read Request,
// Terminate) collected with their header.
const maxCtlPayload = rdmap.MaxTerminateLen

// segKind is what the segment being received is.
type segKind uint8

// rxMessage is the Message a segment kind belongs to, -1 for those not
// counted (a Terminate, an RTR).
var rxMessage = [...]Message{segWrite: MsgWrite, segReadResp: MsgReadResponse, segSend: MsgSend,
	segReadReq: MsgReadRequest, segTerminate: -1, segRTR: -1}

const (
	segWrite segKind = iota
	segReadResp
	segSend
	segReadReq
	segTerminate
	segRTR // a zero-length Send RTR (RFC 6581), consumed by the engine
)

// rx is the receiver's DDP/RDMAP core, the Data Sink of RFC 5041: the
// lower layer hands it each DDP Segment (start, data, end), and it
// validates the headers (RFC 5041 7.1, RFC 5040 7), places payload (or
// tells the lower layer where to read it: dest, placedDirect), accounts for RDMA
// Reads, invalidates, and completes receives in MSN order. It does no I/O;
// only the receiver goroutine touches it.
type rx struct {
	c  *conn
	q  *QP
	rd *mem.Reader

	// The segment being received.
	hdr     [ddp.UntaggedHeaderLen + maxCtlPayload]byte
	hdrN    int
	need    int // header octets to collect (1 until the T bit is known)
	ulen    int
	payload int // ULP payload octets beyond the collected header
	placed  int // payload octets placed so far
	kind    segKind
	dst     []byte // where the next payload octets go
	// verified is the destination of a tagged segment into a Verified
	// region: its payload is staged in bounce (dst) and copied there by
	// end, once the lower layer has verified the segment.
	verified []byte
	bounce   []byte // allocated at the first such segment
	// llpVerifies: the lower layer delivers verified segments only
	// (llp.verifiesFirst), so Verified regions need no staging.
	llpVerifies bool
	section     bool   // rd is inside a critical section
	slot        uint32 // receive-queue offset of a Send's receive (from head)
	sge         int    // SGE of that receive being filled
	sgeOff      uint32 // offset within it
	resp        inRead // a validated Read Request, queued at the segment's end

	// Receive-queue and Read Request sequencing.
	recvMSN uint32       // MSN of the receive at the head of the queue
	rdone   []recvResult // completed receives awaiting in-order delivery
	rrMSN   uint32       // next expected Read Request MSN
	gotAny  bool
	midMsg  bool // the last segment did not end its message

	// heldR, heldS: completions queued in the receive or send CQ that
	// wait for release (CQ.SetInline).
	heldR, heldS bool
}

// recvResult is a completed receive awaiting delivery.
type recvResult struct {
	done      bool
	length    uint32
	inv       mem.STag
	solicited bool
}

// protoError is a protocol violation by the peer, reported in a Terminate.
type protoError struct {
	err   rdmap.Error
	cause error
	// recv, when set, is the receive (offset slot from the head) that the
	// violation fails with status st, as the Terminate is sent.
	recv bool
	slot uint32
	st   Status
}

func (e *protoError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("iwarp: peer violated the protocol: %v (%v)", e.err, e.cause)
	}
	return fmt.Sprintf("iwarp: peer violated the protocol: %v", e.err)
}

// TerminateError is why a QP left Full Operation through a Terminate
// message: one this end sent (Remote false) after detecting an error in
// what the peer sent, or one the peer sent (Remote true).
type TerminateError struct {
	Remote bool
	Err    rdmap.Error
	Cause  error // for a Terminate this end sent, what it detected
}

func (e *TerminateError) Error() string {
	if e.Remote {
		return fmt.Sprintf("iwarp: peer sent Terminate: %v", e.Err)
	}
	if e.Cause != nil {
		return fmt.Sprintf("iwarp: sent Terminate: %v: %v", e.Err, e.Cause)
	}
	return fmt.Sprintf("iwarp: sent Terminate: %v", e.Err)
}

func (e *TerminateError) Unwrap() error { return e.Cause }

func newRx(c *conn) *rx {
	q := c.qp
	return &rx{
		c: c, q: q, rd: q.dev.mem.NewReader(),
		rdone:   make([]recvResult, len(q.rq.slots)),
		recvMSN: 1, rrMSN: 1,
		llpVerifies: c.l != nil && c.l.verifiesFirst(),
	}
}

// close leaves the critical section a segment may have been left in and
// releases the memory reader.
func (r *rx) close() {
	if r.section {
		r.rd.Exit()
		r.section = false
	}
	r.rd.Close()
}

func (c *conn) rxLoop() {
	q := c.qp
	r := newRx(c)
	err := c.receive(r)
	r.release(true)
	r.close()
	select {
	case <-c.stop:
		return // stopped from elsewhere: that reason stands
	default:
	}
	var pe *protoError
	switch {
	case err == nil && c.readHead.Load() != c.readTl.Load():
		// The peer can no longer send the Read Responses: not graceful.
		q.fail(fmt.Errorf("%w: the peer closed its half of the stream with %d RDMA Reads outstanding",
			mpa.ErrLLPLost, c.readTl.Load()-c.readHead.Load()))
	case err == nil: // graceful close by the peer: finish ours
		q.state.CompareAndSwap(uint32(StateRTS), uint32(StateClosing))
		c.graceful.Store(true)
		c.wake()
	case errors.As(err, &pe):
		r.terminate(pe)
	default:
		q.fail(err)
	}
}

// receive runs the lower layer's receive, with a memory fault in it (a
// store into a file mapping whose page cannot come in: an I/O error, the
// file cut under it, a full tmpfs) ending this stream with a Terminate
// rather than the process.
func (c *conn) receive(r *rx) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(interface{ Addr() uintptr })
			if !ok {
				panic(p)
			}
			err = &protoError{err: rdmap.ErrLocalCatastrophic, cause: fmt.Errorf("memory fault at %#x placing the peer's data", f.Addr())}
		}
	}()
	return c.l.receive(r)
}

// terminate leaves a Terminate for the sender and stops the engine.
func (r *rx) terminate(pe *protoError) {
	var hdr ddp.Header
	var rr rdmap.ReadRequest
	if r.hdrN >= ddp.TaggedHeaderLen {
		if h, _, err := ddp.Parse(r.hdr[:r.hdrN]); err == nil {
			hdr = h
			if !h.Tagged() && h.QN() == rdmap.QNReadRequest && r.hdrN >= ddp.UntaggedHeaderLen+rdmap.ReadRequestLen {
				rr = rdmap.ReadRequest(r.hdr[ddp.UntaggedHeaderLen : ddp.UntaggedHeaderLen+rdmap.ReadRequestLen])
			}
		}
	}
	f := rdmap.NewTerminate(pe.err, hdr, uint16(r.ulen), rr)
	b := make([]byte, rdmap.MaxTerminateLen)
	if n, err := f.Encode(b); err == nil {
		r.c.termHdr.Store(&termInfo{err: pe.err, b: b[:n]})
	}
	if pe.recv {
		r.failRecv(pe.slot, pe.st)
	}
	r.q.state.Store(uint32(StateTerminate))
	r.q.fail(&TerminateError{Err: pe.err, Cause: pe.cause})
}

// betweenMessages reports whether the last segment ended its message (or
// none came yet): what arrives next starts a new one.
func (r *rx) betweenMessages() bool { return !r.midMsg }

// start begins a DDP Segment of ulen octets (the ULPDU of an FPDU).
func (r *rx) start(ulen int) {
	r.ulen, r.hdrN, r.need, r.placed, r.dst, r.verified = ulen, 0, 1, 0, nil, nil
}

// dest returns where the segment's next payload octets go, once its header
// is complete and validated, so that the lower layer can read them
// straight into place (then reporting them with placedDirect); nil when they
// must come through data.
func (r *rx) dest() []byte {
	if r.hdrN < r.need {
		return nil
	}
	return r.dst
}

// placedDirect takes note that the lower layer put the first n octets of dest in
// place.
func (r *rx) placedDirect(n int) error {
	r.dst = r.dst[n:]
	r.placed += n
	if len(r.dst) == 0 && r.placed < r.payload {
		return r.nextDst()
	}
	return nil
}

// drop forgets where the payload goes: the lower layer drops the rest of a
// segment whose header broke a rule, to report it at the segment's end.
func (r *rx) drop() { r.dst = nil }

// data takes ULPDU octets: the header first, then payload into place.
func (r *rx) data(b []byte) error {
	for len(b) > 0 {
		if r.hdrN < r.need {
			k := copy(r.hdr[r.hdrN:r.need], b)
			r.hdrN += k
			b = b[k:]
			if r.hdrN == r.need {
				if err := r.headerProgress(); err != nil {
					return err
				}
			}
			continue
		}
		if r.dst == nil {
			return &protoError{err: rdmap.ErrLocalCatastrophic, cause: errors.New("payload with no destination")}
		}
		k := copy(r.dst, b)
		r.dst, b = r.dst[k:], b[k:]
		r.placed += k
		if len(r.dst) == 0 && r.placed < r.payload {
			if err := r.nextDst(); err != nil {
				return err
			}
		}
	}
	return nil
}

// headerProgress decides how much header there is once its first octets
// are in, and begins the segment when all of it is.
func (r *rx) headerProgress() error {
	switch {
	case r.need == 1: // the DDP Control Field: T says the header's length
		// DV first: under another DDP version nothing else of the header
		// can be read (RFC 5041 7.2: tagged 0x04, untagged 0x06).
		if err := ddp.CheckVersion(ddp.Control(r.hdr[0])); err != nil {
			return &protoError{err: rdmap.ErrorOf(err), cause: fmt.Errorf("DDP Control Field %#02x", r.hdr[0])}
		}
		r.need = ddp.Control(r.hdr[0]).HeaderLen()
		if r.ulen < r.need {
			return &protoError{err: rdmap.FromDDP(ddp.ErrLocalCatastrophic),
				cause: fmt.Errorf("DDP Segment of %d octets is shorter than its %d-octet header", r.ulen, r.need)}
		}
		return nil
	case r.need == ddp.UntaggedHeaderLen && !ddp.Control(r.hdr[0]).Tagged():
		// Read Request and Terminate carry their whole payload with the
		// header; their QN says which.
		if qn := ddp.Header(r.hdr[:r.need]).QN(); qn == rdmap.QNReadRequest || qn == rdmap.QNTerminate {
			extra := r.ulen - ddp.UntaggedHeaderLen
			if extra > maxCtlPayload {
				return &protoError{err: rdmap.FromDDP(ddp.ErrMessageTooLong),
					cause: fmt.Errorf("%d-octet payload on queue %d", extra, qn)}
			}
			if extra > 0 {
				r.need += extra
				return nil
			}
		}
	}
	return r.beginSegment()
}

// beginSegment validates a complete header (RFC 5041 7.1, RFC 5040 7) and
// finds where the payload goes, before anything is placed.
func (r *rx) beginSegment() error {
	h := ddp.Header(r.hdr[:ddp.Control(r.hdr[0]).HeaderLen()])
	if err := rdmap.ValidateHeader(h); err != nil {
		return &protoError{err: rdmap.ErrorOf(err), cause: err}
	}
	r.payload = r.ulen - r.hdrN
	op := rdmap.ControlOf(h).Opcode()
	switch op {
	case rdmap.OpWrite:
		r.kind = segWrite
		return r.placeTagged(h, h.TO())
	case rdmap.OpReadResponse:
		r.kind = segReadResp
		c := r.c
		if c.readHead.Load() == c.readTl.Load() {
			return &protoError{err: rdmap.ErrUnexpectedOpcode, cause: errors.New("RDMA Read Response with no RDMA Read outstanding")}
		}
		o := &c.reads[c.readHead.Load()%uint32(len(c.reads))]
		if r.payload == 0 {
			return nil
		}
		if h.STag() != uint32(o.sink) || h.TO() != o.sinkTO+uint64(o.received) || uint64(o.received)+uint64(r.payload) > uint64(o.size) {
			return &protoError{err: rdmap.FromDDP(ddp.ErrBaseBounds),
				cause: fmt.Errorf("RDMA Read Response for STag %#x TO %#x (%d octets) does not continue the Read of %d octets into STag %#x at TO %#x",
					h.STag(), h.TO(), r.payload, o.size, uint32(o.sink), o.sinkTO+uint64(o.received))}
		}
		return r.placeTagged(h, h.TO())
	case rdmap.OpReadRequest:
		r.kind = segReadReq
		return r.readRequest(h)
	case rdmap.OpTerminate:
		r.kind = segTerminate
		return nil
	default:
		r.kind = segSend
		return r.placeSend(h, op)
	}
}

// placeTagged checks a tagged segment's STag and range and holds its
// destination.
func (r *rx) placeTagged(h ddp.Header, to uint64) error {
	if r.payload == 0 {
		return nil // "The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP Message"
	}
	r.enter()
	b, acc, f := r.rd.CheckAccess(mem.STag(h.STag()), r.q.pd, to, uint64(r.payload), mem.RemoteWrite)
	if f != mem.FaultNone {
		return &protoError{err: taggedError(f), cause: fmt.Errorf("STag %#x TO %#x length %d: %v", h.STag(), to, r.payload, f)}
	}
	r.dst = b
	if acc&mem.Verified != 0 && !r.llpVerifies && len(b) <= maxFPDUPayload {
		if r.bounce == nil {
			r.bounce = make([]byte, maxFPDUPayload)
		}
		r.verified, r.dst = b, r.bounce[:len(b)]
	}
	return nil
}

// maxFPDUPayload bounds the payload of an FPDU: MPA's ULPDU_Length is 16
// bits (RFC 5044 section 4.1).
const maxFPDUPayload = 1<<16 - 1

func (r *rx) enter() {
	if !r.section {
		r.rd.Enter()
		r.section = true
	}
}

// taggedError maps a placement fault to its RFC 5041 7.2 (or, for access
// rights, RFC 5040) error.
func taggedError(f mem.Fault) rdmap.Error {
	switch f {
	case mem.FaultNotAssociated:
		return rdmap.FromDDP(ddp.ErrSTagNotAssociated)
	case mem.FaultBaseBounds:
		return rdmap.FromDDP(ddp.ErrBaseBounds)
	case mem.FaultTOWrap:
		return rdmap.FromDDP(ddp.ErrTOWrap)
	case mem.FaultAccess:
		return rdmap.ErrAccessRights
	}
	return rdmap.FromDDP(ddp.ErrInvalidSTag)
}

// sourceError maps an RDMA Read source fault to its RFC 5040 error.
func sourceError(f mem.Fault) rdmap.Error {
	switch f {
	case mem.FaultNotAssociated:
		return rdmap.ErrSTagNotAssociated
	case mem.FaultBaseBounds:
		return rdmap.ErrBaseBounds
	case mem.FaultTOWrap:
		return rdmap.ErrTOWrap
	case mem.FaultAccess:
		return rdmap.ErrAccessRights
	}
	return rdmap.ErrInvalidSTag
}

// placeSend validates a Send segment against the posted receives and finds
// its place in the receive for its MSN.
func (r *rx) placeSend(h ddp.Header, op rdmap.Opcode) error {
	c := r.c
	if !r.gotAny && c.neg.Role == mpa.Responder && c.neg.PeerToPeer && c.neg.RTR == mpa.RTRSend &&
		r.payload == 0 && h.MSN() == r.recvMSN && h.MO() == 0 && h.Last() {
		r.kind = segRTR
		return nil
	}
	rq := &r.q.rq
	head := rq.head.Load()
	posted := rq.tail.Load() - head
	k := h.MSN() - r.recvMSN
	var bufLen uint32
	if k < posted {
		bufLen = rq.slots[(head+k)&rq.mask].length
	}
	err := ddp.ValidateUntagged(h, uint32(r.payload), ddp.UntaggedQueue{
		Valid: true, Posted: posted > 0, FirstMSN: r.recvMSN, LastMSN: r.recvMSN + posted - 1, BufLen: bufLen,
	})
	if err == nil && r.payload == 0 {
		// RFC 5041 7.1 validates only segments that carry payload, but
		// a zero-length Send still completes a receive: it needs one.
		switch {
		case posted == 0:
			err = ddp.ErrMSNNoBuffer
		case k >= posted:
			err = ddp.ErrMSNRange
		}
	}
	if err != nil {
		pe := &protoError{err: rdmap.ErrorOf(err), cause: fmt.Errorf("a Send of MSN %d MO %d length %d: %w", h.MSN(), h.MO(), r.payload, err)}
		var de ddp.Error
		errors.As(err, &de)
		if de == ddp.ErrMessageTooLong || de == ddp.ErrInvalidMO {
			pe.recv, pe.slot, pe.st = true, k, StatusLocalLength
		}
		return pe
	}
	r.slot = k
	if r.payload == 0 {
		return nil
	}
	// Find the SGE holding MO.
	w := &rq.slots[(head+k)&rq.mask]
	off := h.MO()
	r.sge = 0
	for r.sge < int(w.nsge) && off >= w.sgl[r.sge].Len {
		off -= w.sgl[r.sge].Len
		r.sge++
	}
	r.sgeOff = off
	return r.nextDst()
}

// nextDst holds the next piece of the current Send's receive buffer.
func (r *rx) nextDst() error {
	rq := &r.q.rq
	w := &rq.slots[(rq.head.Load()+r.slot)&rq.mask]
	for r.sge < int(w.nsge) && r.sgeOff == w.sgl[r.sge].Len {
		r.sge++
		r.sgeOff = 0
	}
	if r.sge == int(w.nsge) {
		return &protoError{err: rdmap.FromDDP(ddp.ErrMessageTooLong), recv: true, slot: r.slot, st: StatusLocalLength}
	}
	s := w.sgl[r.sge]
	n := min(s.Len-r.sgeOff, uint32(r.payload-r.placed))
	r.enter()
	b, f := r.rd.Check(s.STag, r.q.pd, s.TO+uint64(r.sgeOff), uint64(n), mem.LocalWrite)
	if f != mem.FaultNone {
		// Our own receive buffer is bad: a local error, not the peer's.
		r.failRecv(r.slot, StatusLocalProtection)
		return fmt.Errorf("iwarp: receive %d: SGE %d: %v", w.id, r.sge, f)
	}
	r.sgeOff += n
	r.dst = b
	return nil
}

// failRecv completes the receive at offset k from head with status st. The
// QP is about to fail: the flush skips it.
func (r *rx) failRecv(k uint32, st Status) {
	rq := &r.q.rq
	if k < rq.tail.Load()-rq.head.Load() {
		w := &rq.slots[(rq.head.Load()+k)&rq.mask]
		if !w.failed {
			w.failed = true
			r.q.pushRecv(WC{WRID: w.id, Status: st, Op: WCRecv})
		}
	}
}

// readRequest validates an RDMA Read Request (RFC 5040 4.4, 7) before it is
// queued for the sender at the FPDU's end.
func (r *rx) readRequest(h ddp.Header) error {
	c := r.c
	rrb := r.hdr[ddp.UntaggedHeaderLen:r.hdrN]
	rr, err := rdmap.ParseReadRequest(rrb)
	if err != nil {
		return &protoError{err: rdmap.ErrorOf(err), cause: err}
	}
	// The IRD is the number of Read Request "buffers" (RFC 5040 5.4,
	// RFC 6581): one beyond it has no buffer for its MSN. Requests are
	// answered in order, so only the next MSN is in range.
	free := uint32(len(c.resps)) - (c.respTl.Load() - c.respHead.Load())
	if err := ddp.ValidateUntagged(h, uint32(len(rrb)), ddp.UntaggedQueue{
		Valid: true, Posted: len(c.resps) > 0, FirstMSN: r.rrMSN, LastMSN: r.rrMSN, BufLen: rdmap.ReadRequestLen,
	}); err != nil || free == 0 {
		if err == nil {
			err = ddp.ErrMSNRange
		}
		return &protoError{err: rdmap.ErrorOf(err), cause: fmt.Errorf("RDMA Read Request MSN %d (next %d, IRD %d, %d unanswered): %w",
			h.MSN(), r.rrMSN, len(c.resps), len(c.resps)-int(free), err)}
	}
	r.resp = inRead{sink: rr.SinkSTag(), sinkTO: rr.SinkTO(), src: mem.STag(rr.SrcSTag()), srcTO: rr.SrcTO(), size: rr.Size()}
	if rr.Size() == 0 {
		return nil // "MUST NOT validate the Data Source STag and Data Source Tagged Offset"
	}
	r.enter()
	_, f := r.rd.Check(r.resp.src, r.q.pd, r.resp.srcTO, uint64(r.resp.size), mem.RemoteRead)
	if f != mem.FaultNone {
		return &protoError{err: sourceError(f), cause: fmt.Errorf("RDMA Read source STag %#x TO %#x length %d: %v", rr.SrcSTag(), rr.SrcTO(), rr.Size(), f)}
	}
	return nil
}

// end acts on a segment that arrived whole and sound (an FPDU with a good
// CRC, an SCTP chunk).
func (r *rx) end() error {
	if r.verified != nil {
		// The lower layer has verified the segment: place it, with
		// non-temporal stores (Verified regions are the target's
		// windows into its stores, written and not soon read again).
		mem.CopyNT(r.verified, r.bounce[:r.placed])
		r.verified = nil
	}
	if r.section {
		r.rd.Exit()
		r.section = false
	}
	if r.hdrN < r.need {
		return &protoError{err: rdmap.FromDDP(ddp.ErrLocalCatastrophic), cause: errors.New("FPDU ended inside the DDP header")}
	}
	c := r.c
	h := ddp.Header(r.hdr[:ddp.Control(r.hdr[0]).HeaderLen()])
	r.gotAny = true
	r.midMsg = !h.Last()
	if h.Last() {
		c.rxMsgs.Add(1) // before the post of a Read Request's answer
	}
	c.markFirstRx()
	if m := rxMessage[r.kind]; m >= 0 {
		c.stats.receivedOctets.Add(uint64(r.payload))
		if h.Last() {
			c.stats.received[m].Add(1)
		}
	}
	switch r.kind {
	case segReadResp:
		o := &c.reads[c.readHead.Load()%uint32(len(c.reads))]
		o.received += uint32(r.payload)
		if h.Last() {
			if o.received != o.size {
				return &protoError{err: rdmap.ErrOperationUnspecified,
					cause: fmt.Errorf("RDMA Read Response of %d octets for a Read of %d", o.received, o.size)}
			}
			if !o.rtr && r.q.completeHeld(o.wr, StatusSuccess, true) {
				r.heldS = true
			}
			c.readHead.Add(1)
			c.post() // an ORD slot is free
		}
	case segSend:
		if h.Last() {
			st := &r.rdone[(r.q.rq.head.Load()+r.slot)&r.q.rq.mask]
			st.done, st.length = true, h.MO()+uint32(r.payload)
			op := rdmap.ControlOf(h).Opcode()
			st.solicited = op.SolicitedEvent()
			st.inv = 0
			if op.Invalidates() {
				stag := mem.STag(rdmap.InvalidateSTag(h))
				if f := r.q.dev.mem.RemoteInvalidate(stag, r.q.pd); f != mem.FaultNone {
					return &protoError{err: invalidateError(f), cause: fmt.Errorf("invalidating STag %#x for a Send with Invalidate: %v", uint32(stag), f)}
				}
				st.inv = stag
			}
			r.deliverRecvs()
		}
	case segRTR:
		r.recvMSN++
	case segReadReq:
		tl := c.respTl.Load()
		c.resps[tl%uint32(len(c.resps))] = r.resp
		c.respTl.Store(tl + 1)
		r.rrMSN++
		c.post()
	case segTerminate:
		t, err := rdmap.ParseTerminate(r.hdr[ddp.UntaggedHeaderLen:r.hdrN])
		if err != nil {
			return &protoError{err: rdmap.ErrorOf(err), cause: err}
		}
		r.peerTerminate(t)
		return errPeerTerminate
	}
	return nil
}

// errPeerTerminate ends the receiver after the peer's Terminate (the QP has
// already failed with the peer's reason).
var errPeerTerminate = errors.New("iwarp: peer terminated the stream")

// peerTerminate records the peer's Terminate as the QP's error, and fails
// the RDMA Read it names, if any. The Read is found by the MSN of its
// Request in the terminated DDP header: the sender numbers Read Requests
// from 1 as it appends them to the ORD queue, whose positions count from 0.
// (Reads before it whose Responses the peer had not sent yet are flushed.)
func (r *rx) peerTerminate(t rdmap.Terminate) {
	c := r.c
	e := t.Err()
	if d := t.DDPHeader(); d != nil && !d.Tagged() && d.QN() == rdmap.QNReadRequest &&
		d.MSN()-1-c.readHead.Load() < c.readTl.Load()-c.readHead.Load() {
		o := &c.reads[(d.MSN()-1)%uint32(len(c.reads))]
		if !o.rtr {
			st := StatusRemoteOperation
			if e.Layer == rdmap.LayerRDMAP && e.Type == rdmap.TypeRemoteProtection || e.Layer == rdmap.LayerDDP && e.Type == rdmap.ErrorType(ddp.TypeTagged) {
				st = StatusRemoteAccess
			}
			r.q.completeInflight(o.wr, st)
		}
	}
	r.q.dev.stats.terminate(true, e)
	r.q.fail(&TerminateError{Remote: true, Err: e})
}

// invalidateError maps a failed remote invalidation to its RFC 5040 error,
// as rdmap.ValidateInvalidate numbers them: an STag that does not exist is
// Invalid STag, one of another PD (not associated with this stream) the
// Remote Protection "STag cannot be Invalidated", one whose region does not
// allow remote invalidation the Remote Operation one.
func invalidateError(f mem.Fault) rdmap.Error {
	return rdmap.ErrorOf(rdmap.ValidateInvalidate(rdmap.InvalidateTarget{
		Valid:         f != mem.FaultInvalidSTag,
		Associated:    f != mem.FaultInvalidSTag && f != mem.FaultNotAssociated,
		Invalidatable: f == mem.FaultNone,
	}))
}

// deliverRecvs completes, in MSN order, every receive whose message is in.
func (r *rx) deliverRecvs() {
	rq := &r.q.rq
	for {
		h := rq.head.Load()
		if h == rq.tail.Load() {
			return
		}
		st := &r.rdone[h&rq.mask]
		if !st.done {
			return
		}
		wc := WC{WRID: rq.slots[h&rq.mask].id, Op: WCRecv, ByteLen: st.length, Invalidated: st.inv, Solicited: st.solicited}
		*st = recvResult{}
		// Free the slot before the completion is visible: an application
		// that reposts as it polls must find room (verbs semantics).
		rq.head.Store(h + 1)
		r.recvMSN++
		if r.q.pushRecvHeld(wc) {
			r.heldR = true
		}
	}
}

// release hands the completions this receiver queued without a wake-up to
// their CQ's inline consumer, or wakes the CQ's waiters (CQ.SetInline). The
// receiver calls it before any read that may wait, and at its end. Inside
// a critical section of the memory reader (a segment read partly into
// place), or when the receiver ends, it only wakes: the consumer may
// deregister memory, which waits for the section's end.
func (r *rx) release(ending bool) {
	if !r.heldR && !r.heldS {
		return
	}
	inline := !ending && !r.section
	took := false
	if r.heldR {
		took = r.q.rcq.release(inline)
	}
	if r.heldS && (!r.heldR || r.q.scq != r.q.rcq) {
		took = r.q.scq.release(inline) || took
	}
	if took {
		r.c.stats.inline.Add(1)
	}
	r.heldR, r.heldS = false, false
}
