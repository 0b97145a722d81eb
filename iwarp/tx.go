package iwarp

import (
	"fmt"
	"runtime"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// Transmit batching: one write to the lower layer carries segments of many
// messages until it holds this much payload or this many iovecs.
const (
	batchBytes = 256 << 10
	batchIOV   = maxIOV
)

// directMax bounds what a poster transmits in its own goroutine
// (conn.post): a batch of at most this much payload, and no work request
// or Read Response larger. The sender goroutine takes larger ones, so that
// a poster does not spend a large message's CRC and copy, and the
// poster's own work (the next command) runs beside them.
const directMax = 64 << 10

// writeChunk: the sender goroutine writes its batch whenever it holds this
// much payload, inside a message too, so that the octets the CRC has just
// read are still in the CPU's cache when the write copies them into the
// socket. A 1 MiB message framed whole was read from memory twice: once
// for its CRCs, once by the copy (docs/performance.md, thirteenth and
// fourteenth sessions). Each write starts its own segments (sock.doWrite),
// so writing inside a message costs FPDU alignment nothing.
const writeChunk = 128 << 10

// tx is the sender's DDP/RDMAP core: it takes work requests and Read
// Responses in order, segments each message to the lower layer's MULPDU,
// and completes what a batch carried once the batch is written. The sender
// goroutine runs it, and so, for small work while that goroutine is idle,
// do posters (conn.post); conn.txmu serializes them.
type tx struct {
	c   *conn
	q   *QP
	l   llp
	rd  *mem.Reader
	iov [][]byte
	// iovs is the array behind iov, which a half-written batch advances.
	iovs [][]byte
	msn  [3]uint32 // next MSN per untagged queue (Send, Read Request, Terminate)

	pending    sendWQE // a taken work request not yet framed (a Read waiting for an ORD slot)
	hasPend    bool
	pendingIdx int
	hdr        [ddp.UntaggedHeaderLen + rdmap.MaxTerminateLen]byte
	pieces     [MaxSGE][]byte // the current message's payload
	sub        [MaxSGE][]byte // one segment's share of it
	done       []int          // inflight records this batch completes
	resps      int            // Read Responses this batch sends
	bytes      int
	inIOV      int   // payload octets in iov, not yet written
	direct     bool  // the batch is a poster's (batch(true))
	broken     bool  // a writev failed part way: the stream is unusable
	werr       error // a writev failed: nothing more is framed or written
	// unsent: a poster's batch is written only in part (the socket was
	// full); iov holds the rest, rd's section still holds its memory, and
	// done awaits it. The sender goroutine finishes it first.
	unsent bool
	// failed: a batch failed (the QP is failing); nothing more is sent
	// but the Terminate. ended: the sender goroutine is done; posters
	// send nothing.
	failed error
	ended  bool
	// rxSeen is the receiver's message count (conn.rxMsgs) when the last
	// write began: a poster writes itself only when the peer has sent
	// something since, see post.
	rxSeen uint64
}

func newTx(c *conn) *tx {
	q := c.qp
	iov := make([][]byte, 0, batchIOV+2*mpa.MaxULPDU/(mpa.MarkerInterval-mpa.MarkerSize))
	return &tx{
		c: c, q: q, l: c.l, rd: q.dev.mem.NewReader(),
		iov: iov, iovs: iov,
		msn:  [3]uint32{1, 1, 1},
		done: make([]int, 0, 64),
	}
}

func (c *conn) txLoop() {
	q, t := c.qp, c.tx
	defer t.rd.Close()
	if err := t.l.startBatch(false); err != nil {
		q.fail(err)
		c.txEnd()
		return
	}
	// RFC 5044 7.1.2 rule 4: the MPA Responder sends nothing, not even a
	// Marker, before it has received a valid FPDU.
	// A peer that closes before sending one ends the connection
	// gracefully: answer its FIN with ours.
	for waiting := t.l.holdsFirstTx(); waiting; {
		select {
		case <-c.firstRx:
			waiting = false
		case <-c.stop:
			c.txEnd()
			return
		case <-q.kick:
			if c.graceful.Load() {
				c.txEnd()
				c.l.closeWrite()
				return
			}
		}
	}
	if c.neg.Role == mpa.Initiator && c.neg.PeerToPeer {
		if err := t.sendRTR(); err != nil {
			q.fail(err)
			<-c.stop
			c.txEnd()
			return
		}
	}
	// From here on posters may transmit themselves (conn.post).
	c.direct.Store(t.l.postsDirect())
	for {
		select {
		case <-c.stop:
			c.txEnd()
			return
		default:
		}
		c.txmu.Lock()
		if t.failed != nil {
			c.txmu.Unlock()
			<-c.stop
			c.txEnd()
			return
		}
		if t.unsent {
			if err := t.finish(); err != nil {
				t.failed = err
				c.txmu.Unlock()
				q.fail(err)
				continue
			}
		}
		if !c.graceful.Load() && t.hasWork() && q.held() {
			// Corked work waits for Uncork here too, as in post: a
			// wake-up left from before the Cork would otherwise send the
			// first of the corked work alone. A graceful close is not
			// held.
			c.txmu.Unlock()
			if !c.idle() {
				return
			}
			continue
		}
		if !t.hasWork() {
			if c.graceful.Load() && q.sq.Len() == 0 && !t.hasPend && c.readHead.Load() == c.readTl.Load() {
				t.ended = true
				c.txmu.Unlock()
				c.l.closeWrite() // RFC 5041 6.2.1: FIN after the last message
				return
			}
			c.txmu.Unlock()
			if !c.idle() {
				return
			}
			continue
		}
		_, err := t.batch(false)
		if err != nil {
			t.failed = err
		}
		c.txmu.Unlock()
		if err != nil {
			// Let the receiver see the error too; the reaper flushes.
			q.fail(err)
		}
	}
}

// idle waits for a wake-up of the sender goroutine and reports true, or
// ends the sender when the connection stops and reports false.
func (c *conn) idle() bool {
	select {
	case <-c.qp.kick:
		if c.respHead.Load() == c.respTl.Load() {
			// Let the posters that are ready run first: woken by the
			// first of them, the sender would otherwise run next (Go
			// runs a goroutine a wake-up readies before the others
			// queued) and write each post alone. Not when a Read
			// Response waits: the peer waits on it.
			runtime.Gosched()
		}
		return true
	case <-c.stop:
		c.txEnd()
		return false
	}
}

// txEnd ends the sender: what a poster left half written goes out, then
// the Terminate the receiver left, if any; posters send nothing more.
func (c *conn) txEnd() {
	c.txmu.Lock()
	defer c.txmu.Unlock()
	t := c.tx
	t.ended = true
	if t.unsent {
		t.finish()
	}
	t.sendTerminate()
}

// post transmits what is posted: in the calling goroutine when the sender
// is idle and the post answers the peer (a message came in since this end
// last wrote), with no goroutine hand-off, and so no wake-up, for a small
// I/O; else by waking the sender goroutine. A post that follows this end's
// own write with nothing received between is part of a stream or a burst
// (pipelined Sends, many completions waking many submitters): the sender
// goroutine takes all of it into one write, where posters writing alone
// would make a write each. Nothing is sent while the QP is corked; Uncork
// posts.
func (c *conn) post() {
	if c.qp.held() {
		return
	}
	if !c.direct.Load() || !c.txmu.TryLock() {
		c.wake()
		return
	}
	t := c.tx
	more, err := false, error(nil)
	if t.ended || t.failed != nil || t.unsent || c.rxMsgs.Load() == t.rxSeen && !c.alwaysDirect {
		more = true // the sender goroutine sees to it
	} else {
		for !more && err == nil && t.hasWork() {
			more, err = t.batch(true)
		}
		if err != nil {
			t.failed = err
		}
		// A poster that came meanwhile found the lock taken and woke the
		// sender; so does a batch that was left to it.
		more = more || t.unsent
	}
	c.txmu.Unlock()
	if err != nil {
		c.qp.fail(err)
	}
	// A graceful close is the sender goroutine's to finish: its FIN may
	// have waited for what this post sent or for what freed an ORD slot.
	if more || c.graceful.Load() {
		c.wake()
	}
}

// hasWork reports whether a batch would send anything.
func (t *tx) hasWork() bool {
	c := t.c
	if c.respHead.Load() != c.respTl.Load() {
		return true
	}
	if t.hasPend {
		return t.pending.op != OpRead || t.ordFree()
	}
	return t.q.sq.Len() > 0
}

func (t *tx) ordFree() bool {
	c := t.c
	return int(c.readTl.Load()-c.readHead.Load()) < len(c.reads)-1 && len(c.reads) > 1
}

// batch frames as much queued work as fits one writev and writes it. A
// poster's batch (direct) stops before a message larger than directMax,
// reporting it left (more), and leaves what the socket would not take now
// for the sender goroutine (t.unsent).
func (t *tx) batch(direct bool) (more bool, err error) {
	c, q := t.c, t.q
	if err := t.l.startBatch(t.bytes >= 64<<10); err != nil {
		return false, err
	}
	limit := batchBytes
	if direct {
		limit = directMax
	}
	t.iov, t.done, t.resps, t.bytes, t.inIOV, t.direct = t.iovs[:0], t.done[:0], 0, 0, 0, direct
	t.rd.Enter()
	for t.bytes < limit && len(t.iov) < batchIOV && t.rd.Free() >= MaxSGE && err == nil && t.werr == nil {
		// Read Responses first: the peer waits on them, and they free IRD.
		if h := c.respHead.Load() + uint32(t.resps); h != c.respTl.Load() {
			r := &c.resps[h%uint32(len(c.resps))]
			if direct && r.size > directMax {
				more = true
				break
			}
			if err = t.readResponse(r); err == nil {
				t.resps++
			}
			continue
		}
		if !t.hasPend {
			w, ok := q.sq.Poll()
			if !ok {
				break
			}
			t.pending, t.hasPend = w, true
			t.pendingIdx = q.takeInflight(&t.pending)
		}
		if t.pending.op == OpRead && !t.ordFree() {
			break // wait for a Read Response to free an ORD slot
		}
		if direct && t.pending.op != OpRead && t.pending.length > directMax {
			more = true
			break
		}
		t.hasPend = false
		err = t.workRequest(&t.pending, t.pendingIdx)
	}
	if direct && t.bytes >= limit {
		more = true // what is left is the sender goroutine's
	}
	// The Read Responses are framed: their IRD slots are free. (Freed
	// before the write, since the peer may ask again as soon as the last
	// Response octet reaches it.)
	c.respHead.Add(uint32(t.resps))
	// A work request that failed locally framed nothing: what the batch
	// framed before it is sound and still goes out and completes.
	if t.werr == nil {
		if direct {
			if t.flushNow(); t.unsent {
				return more, err // the section stays entered: see finish
			}
		} else {
			t.flush()
		}
	}
	t.rd.Exit()
	if t.werr != nil {
		return more, t.werr
	}
	t.complete()
	return more, err
}

// finish writes the rest of a batch a poster left half written, then
// completes it.
func (t *tx) finish() error {
	t.flush() // the rest of a write counted already
	t.unsent = false
	t.rd.Exit()
	if t.werr != nil {
		return t.werr
	}
	t.complete()
	return nil
}

// complete delivers the completions of what the batch carried.
func (t *tx) complete() {
	for _, i := range t.done {
		t.q.completeInflight(i, StatusSuccess)
	}
}

// localFault is a send work request that named memory it may not use.
type localFault struct {
	wr    uint64
	fault mem.Fault
}

func (e *localFault) Error() string {
	return fmt.Sprintf("iwarp: work request %d: local protection error: %v", e.wr, e.fault)
}

// gather resolves a work request's SGL to slices of registered memory.
func (t *tx) gather(w *sendWQE) (int, mem.Fault) {
	for i := range int(w.nsge) {
		s := w.sgl[i]
		b, f := t.rd.Check(s.STag, t.q.pd, s.TO, uint64(s.Len), 0)
		if f != mem.FaultNone {
			return 0, f
		}
		t.pieces[i] = b
	}
	return int(w.nsge), mem.FaultNone
}

// workRequest frames one send work request.
func (t *tx) workRequest(w *sendWQE, idx int) error {
	n, f := t.gather(w)
	if f == mem.FaultNone && w.op == OpRead {
		f = t.q.dev.mem.CheckSTag(w.sgl[0].STag, t.q.pd, mem.RemoteWrite)
	}
	if f != mem.FaultNone {
		t.q.completeInflight(idx, StatusLocalProtection)
		return &localFault{w.id, f}
	}
	st := &t.c.stats
	switch w.op {
	case OpWrite:
		st.sent[MsgWrite].Add(1)
		st.sentOctets.Add(uint64(w.length))
		t.tagged(rdmap.OpWrite, uint32(w.rstag), w.rto, n, w.length)
		t.done = append(t.done, idx)
	case OpRead:
		var rr [rdmap.ReadRequestLen]byte
		(rdmap.ReadRequestFields{SinkSTag: uint32(w.sgl[0].STag), SinkTO: w.sgl[0].TO, Size: w.length,
			SrcSTag: uint32(w.rstag), SrcTO: w.rto}).Encode(rr[:])
		c := t.c
		tl := c.readTl.Load()
		c.reads[tl%uint32(len(c.reads))] = outRead{sink: w.sgl[0].STag, sinkTO: w.sgl[0].TO, size: w.length, wr: idx}
		c.readTl.Store(tl + 1)
		st.sent[MsgReadRequest].Add(1)
		t.untagged(rdmap.OpReadRequest, rdmap.QNReadRequest, 0, rr[:])
	default:
		op := [...]rdmap.Opcode{OpSend: rdmap.OpSend, OpSendSE: rdmap.OpSendSE,
			OpSendInv: rdmap.OpSendInvalidate, OpSendSEInv: rdmap.OpSendSEInvalidate}[w.op]
		st.sent[MsgSend].Add(1)
		st.sentOctets.Add(uint64(w.length))
		t.sendMessage(op, uint32(w.inv), n, w.length)
		t.done = append(t.done, idx)
	}
	return nil
}

// readResponse frames the RDMA Read Response to a validated Read Request.
func (t *tx) readResponse(r *inRead) error {
	n := 0
	if r.size > 0 {
		b, f := t.rd.Check(r.src, t.q.pd, r.srcTO, uint64(r.size), mem.RemoteRead)
		if f != mem.FaultNone {
			// Invalidated since the Request was validated.
			return fmt.Errorf("iwarp: RDMA Read source STag %#x: %v", uint32(r.src), f)
		}
		t.pieces[0], n = b, 1
	}
	t.c.stats.sent[MsgReadResponse].Add(1)
	t.c.stats.sentOctets.Add(uint64(r.size))
	t.tagged(rdmap.OpReadResponse, r.sink, r.sinkTO, n, r.size)
	return nil
}

// tagged frames a tagged message of total octets from t.pieces[:n].
func (t *tx) tagged(op rdmap.Opcode, stag uint32, to uint64, n int, total uint32) {
	f, _ := rdmap.TaggedFields(op, stag, to)
	for off := uint32(0); ; {
		seg := min(total-off, t.segRoom(ddp.TaggedHeaderLen))
		f.Last, f.TO = off+seg == total, to+uint64(off)
		f.Encode(t.hdr[:])
		t.frame(t.hdr[:ddp.TaggedHeaderLen], n, off, seg)
		off += seg
		if off == total {
			return
		}
	}
}

// sendMessage frames a Send of total octets from t.pieces[:n].
func (t *tx) sendMessage(op rdmap.Opcode, inv uint32, n int, total uint32) {
	f, _ := rdmap.UntaggedFields(op, t.msn[rdmap.QNSend], inv)
	t.msn[rdmap.QNSend]++
	for off := uint32(0); ; {
		seg := min(total-off, t.segRoom(ddp.UntaggedHeaderLen))
		f.Last, f.MO = off+seg == total, off
		f.Encode(t.hdr[:])
		t.frame(t.hdr[:ddp.UntaggedHeaderLen], n, off, seg)
		off += seg
		if off == total {
			return
		}
	}
}

// untagged frames a single-segment untagged control message (Read Request,
// Terminate) whose payload travels with the header.
func (t *tx) untagged(op rdmap.Opcode, qn uint32, inv uint32, payload []byte) {
	f, _ := rdmap.UntaggedFields(op, t.msn[qn], inv)
	t.msn[qn]++
	f.Last = true
	f.Encode(t.hdr[:])
	k := copy(t.hdr[ddp.UntaggedHeaderLen:], payload)
	t.frame(t.hdr[:ddp.UntaggedHeaderLen+k], 0, 0, 0)
}

// flush writes what is framed. A failed write leaves the stream cut inside
// a segment: t.werr stops all framing.
func (t *tx) flush() {
	if len(t.iov) > 0 {
		if !t.unsent {
			t.rxSeen = t.c.rxMsgs.Load()
		}
		err := t.l.write(t.iov)
		if err != nil {
			t.broken = true
			t.werr = fmt.Errorf("%w: %v", mpa.ErrLLPLost, err)
		}
		if !t.unsent {
			t.c.stats.writes.Add(1)
		}
	}
	t.iov, t.inIOV = t.iovs[:0], 0
}

// flushNow writes what the lower layer takes of the batch now; the rest,
// if any, stays in t.iov with t.unsent set.
func (t *tx) flushNow() {
	if len(t.iov) == 0 {
		return
	}
	t.rxSeen = t.c.rxMsgs.Load()
	rest, err := t.l.tryWrite(t.iov)
	t.c.stats.writes.Add(1)
	t.c.stats.directWrites.Add(1)
	switch {
	case err != nil:
		t.broken = true
		t.werr = fmt.Errorf("%w: %v", mpa.ErrLLPLost, err)
	case len(rest) > 0:
		t.iov, t.unsent = rest, true
		return
	}
	t.iov, t.inIOV = t.iovs[:0], 0
}

// segRoom returns the most payload the next DDP Segment, with a header of
// hdrLen octets, takes. The sender first writes its batch once that holds
// writeChunk octets of payload or would with the segment: inside a
// message too, so that the segments after it are sized for the next write.
func (t *tx) segRoom(hdrLen int) uint32 {
	room := t.l.maxULPDU()
	if !t.direct && t.inIOV > 0 && t.inIOV+room > writeChunk {
		t.flush()
		room = t.l.maxULPDU()
	}
	return uint32(room - hdrLen)
}

// frame appends one DDP Segment: hdr and octets [off, off+seg) of
// t.pieces[:n]. When the lower layer's batch is full (a Markers sender's
// staging buffer), it first writes the segments framed so far.
func (t *tx) frame(hdr []byte, n int, off, seg uint32) {
	if t.werr != nil {
		return
	}
	k := 0
	for i := 0; i < n && seg > 0; i++ {
		p := t.pieces[i]
		if off >= uint32(len(p)) {
			off -= uint32(len(p))
			continue
		}
		take := min(uint32(len(p))-off, seg)
		t.sub[k] = p[off : off+take]
		k++
		seg -= take
		off = 0
	}
	var err error
	if t.iov, err = t.l.appendULPDU(t.iov, hdr, t.sub[:k]); err == errBatchFull {
		if t.flush(); t.werr == nil {
			t.iov, _ = t.l.appendULPDU(t.iov, hdr, t.sub[:k])
		}
	}
	for i := range k {
		t.bytes += len(t.sub[i])
		t.inIOV += len(t.sub[i])
		t.sub[i] = nil
	}
}

// sendRTR sends the revision-2 ready-to-receive message that opens a
// peer-to-peer connection (RFC 6581): a zero-length Send, RDMA Write, or
// RDMA Read Request.
func (t *tx) sendRTR() error {
	if err := t.l.startBatch(false); err != nil {
		return err
	}
	t.iov, t.inIOV = t.iovs[:0], 0
	switch t.c.neg.RTR {
	case mpa.RTRSend:
		t.sendMessage(rdmap.OpSend, 0, 0, 0)
	case mpa.RTRRead:
		var rr [rdmap.ReadRequestLen]byte
		(rdmap.ReadRequestFields{}).Encode(rr[:])
		c := t.c
		tl := c.readTl.Load()
		c.reads[tl%uint32(len(c.reads))] = outRead{rtr: true}
		c.readTl.Store(tl + 1)
		t.untagged(rdmap.OpReadRequest, rdmap.QNReadRequest, 0, rr[:])
	default:
		t.tagged(rdmap.OpWrite, 0, 0, 0, 0)
	}
	t.flush()
	return t.werr
}

// sendTerminate sends the Terminate the receiver left, if any, as the last
// message of the stream, within a bounded time.
func (t *tx) sendTerminate() {
	ti := t.c.termHdr.Load()
	if ti == nil || t.broken {
		return // nothing to send, or a write broke off inside an FPDU
	}
	t.l.startBatch(false) // an EMSS that cannot be re-read keeps the last one
	t.iov = t.iovs[:0]
	t.q.dev.stats.terminate(false, ti.err)
	t.untagged(rdmap.OpTerminate, rdmap.QNTerminate, 0, ti.b)
	t.l.setWriteDeadline(time.Now().Add(terminateGrace))
	t.flush() // best effort: the peer may be gone already
}
