package iwarp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp/cq"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// QPState is a queue pair's state, after the RDMAP Stream states.
type QPState uint32

const (
	// StateIdle: created, not connected. Receives may be posted.
	StateIdle QPState = iota
	// StateRTS: connected, in Full Operation.
	StateRTS
	// StateClosing: a graceful close is under way; queued work still goes
	// out, new work is refused.
	StateClosing
	// StateTerminate: an error was detected and a Terminate message is
	// being sent; nothing more is placed.
	StateTerminate
	// StateError: the stream is gone; every outstanding work request has
	// been or is being completed with an error status.
	StateError
)

func (s QPState) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateRTS:
		return "RTS"
	case StateClosing:
		return "closing"
	case StateTerminate:
		return "terminate"
	case StateError:
		return "error"
	}
	return fmt.Sprintf("QPState(%d)", uint32(s))
}

// ErrNoORD is returned by PostSend for an RDMA Read on a connection whose
// negotiated ORD is 0: the peer accepts no RDMA Read Requests.
var ErrNoORD = errors.New("iwarp: RDMA Read on a connection whose ORD is 0")

// QPConfig describes a queue pair.
type QPConfig struct {
	PD     mem.PD
	SendCQ *CQ
	RecvCQ *CQ
	// MaxSendWR and MaxRecvWR bound the work requests outstanding on each
	// queue (default 256).
	MaxSendWR, MaxRecvWR int
}

// sendWQE is a posted send work request as the engine keeps it.
type sendWQE struct {
	id     uint64
	op     Opcode
	nsge   uint8
	sgl    [MaxSGE]SGE
	rstag  mem.STag
	rto    uint64
	inv    mem.STag
	length uint32
	quiet  bool
}

// recvWQE is a posted receive.
type recvWQE struct {
	id     uint64
	nsge   uint8
	sgl    [MaxSGE]SGE
	length uint32
	// failed: the receiver already completed it with an error status (a
	// Send too long for it, a bad SGE) before failing the QP; the flush
	// must not complete it a second time.
	failed bool
}

// QP is a queue pair: a send queue, a receive queue and, once connected, the
// RDMAP Stream over one MPA/TCP connection.
type QP struct {
	dev      *Device
	qpn      uint32
	pd       mem.PD
	scq, rcq *CQ
	state    atomic.Uint32

	sq      *cq.Ring[sendWQE] // posted, not yet taken by the sender
	sqCount atomic.Int32      // posted and not yet completed
	maxSend int32
	kick    chan struct{} // wakes the sender
	corks   atomic.Int32  // Cork calls not yet undone by Uncork
	corked  atomic.Bool   // something was posted while corked

	rq recvQueue

	// inflight holds the send work requests the sender has taken, in
	// posting order, until their completions are delivered in that order.
	sqmu     sync.Mutex
	inflight []inflightWR
	inHead   int
	inLen    int

	mu       sync.Mutex // connection lifecycle
	conn     *conn
	failOnce sync.Once
	err      error
	done     chan struct{}
	closing  bool // no connection may attach any more

	// flushMu serializes taking work requests off the queues once the
	// engine has stopped: the flush, and PostSend completing a request it
	// queued after the flush (flushed set).
	flushMu sync.Mutex
	flushed atomic.Bool
}

// inflightWR is a taken send work request awaiting its completion.
type inflightWR struct {
	id     uint64
	op     WCOpcode
	bytes  uint32
	done   bool
	quiet  bool
	since  uint64 // the CQ's Loud count when taken, for a quiet one
	status Status
}

// recvQueue holds posted receives. Applications produce (under mu); the
// receiver consumes from head, looking ahead by MSN.
type recvQueue struct {
	mu    sync.Mutex
	slots []recvWQE
	mask  uint32
	head  atomic.Uint32 // next receive to complete
	tail  atomic.Uint32 // next free slot
}

// NewQP creates a queue pair in StateIdle.
func (d *Device) NewQP(cfg QPConfig) (*QP, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, errors.New("iwarp: a QP needs a send and a receive CQ")
	}
	if cfg.PD.IsZero() {
		return nil, errors.New("iwarp: a QP needs a protection domain")
	}
	if cfg.MaxSendWR <= 0 {
		cfg.MaxSendWR = 256
	}
	if cfg.MaxRecvWR <= 0 {
		cfg.MaxRecvWR = 256
	}
	sq, err := cq.New[sendWQE](cfg.MaxSendWR)
	if err != nil {
		return nil, err
	}
	rqn := 1
	for rqn < cfg.MaxRecvWR {
		rqn <<= 1
	}
	q := &QP{
		dev: d, qpn: d.nextQPN.Add(1), pd: cfg.PD, scq: cfg.SendCQ, rcq: cfg.RecvCQ,
		sq: sq, maxSend: int32(cfg.MaxSendWR), kick: make(chan struct{}, 1),
		inflight: make([]inflightWR, cfg.MaxSendWR),
		done:     make(chan struct{}),
	}
	q.rq.slots = make([]recvWQE, rqn)
	q.rq.mask = uint32(rqn - 1)
	if err := d.addQP(q); err != nil {
		return nil, err
	}
	return q, nil
}

// QPN returns the queue pair's number.
func (q *QP) QPN() uint32 { return q.qpn }

// State returns the queue pair's state.
func (q *QP) State() QPState { return QPState(q.state.Load()) }

// Err returns why the QP left StateRTS, or nil: a *TerminateError for a
// Terminate this end sent (Remote false) or received (Remote true); an
// error wrapping an MPA error (mpa.CodeOf) when the connection was lost
// (mpa.CodeLLPLost) or broke under the framing; ErrClosed after Close.
// It stays nil when the stream ended gracefully, on both sides: the end
// that called Disconnect and the peer that closed in answer. Close after
// such an end does not change it.
func (q *QP) Err() error {
	select {
	case <-q.done:
	default:
		q.mu.Lock()
		defer q.mu.Unlock()
	}
	return q.err
}

// Done is closed once the QP is in StateError with every work request
// completed.
func (q *QP) Done() <-chan struct{} { return q.done }

// PostSend queues a send work request. The QP must be connected.
func (q *QP) PostSend(wr *SendWR) error {
	if s := q.State(); s != StateRTS {
		return fmt.Errorf("%w: PostSend in state %v", ErrQPState, s)
	}
	w := sendWQE{id: wr.ID, op: wr.Op, rstag: wr.RemoteSTag, rto: wr.RemoteTO, inv: wr.InvalidateSTag, quiet: wr.Quiet}
	if len(wr.SGL) > MaxSGE {
		return ErrTooManySGE
	}
	if wr.Op > OpRead {
		return fmt.Errorf("iwarp: unknown opcode %d", wr.Op)
	}
	if wr.Op == OpRead && len(wr.SGL) != 1 {
		return ErrReadSGE
	}
	// q.conn was set before the state became RTS (an atomic store that the
	// load above saw), and never changes afterwards.
	if wr.Op == OpRead && len(q.conn.reads) <= 1 {
		return ErrNoORD // it would never be sent
	}
	var n uint64
	for i, s := range wr.SGL {
		w.sgl[i] = s
		n += uint64(s.Len)
	}
	if n > 1<<32-1 {
		return ErrMessageSize
	}
	w.nsge, w.length = uint8(len(wr.SGL)), uint32(n)
	if q.sqCount.Add(1) > q.maxSend {
		q.sqCount.Add(-1)
		return ErrQueueFull
	}
	if err := q.sq.Push(w, false); err != nil {
		q.sqCount.Add(-1)
		return ErrQueueFull
	}
	if q.flushed.Load() {
		// The QP failed and was flushed between the state check and the
		// Push: no sender will take the request, so flush it here. (The
		// flush sets flushed before it polls, and this load follows the
		// Push: one of the two sees the request.)
		q.flushMu.Lock()
		q.flushSendQueueLocked()
		q.flushMu.Unlock()
		return nil
	}
	q.conn.post()
	return nil
}

// Cork holds back the transmission of the send work requests posted from
// now on, from any goroutine, until as many Uncorks: like TCP_CORK, so that
// what one step posts (an RDMA Write and the Send after it) goes out in one
// write, made by Uncork in its caller's goroutine when the sender is idle.
func (q *QP) Cork() { q.corks.Add(1) }

// held reports whether the QP is corked, so that what is posted now is
// Uncork's to send, and tells Uncork that there is something. It looks
// twice: an Uncork that came before the flag was set did not see it.
func (q *QP) held() bool {
	if q.corks.Load() == 0 {
		return false
	}
	q.corked.Store(true)
	return q.corks.Load() > 0
}

// AwaitAnswer tells the QP that its ULP will wait for the peer's answer
// to what it posts next, with nothing else to do meanwhile: a receiver
// asleep in the poller is woken to poll for the answer (for
// ConnConfig.ReadSpin, or longer for a slower peer: spin.Turnaround), and
// one that is busy polls for it next, instead of sleeping and paying a
// wake-up when it comes. Call it before the post: a quick peer may answer
// before the post returns, and the receiver would then spin for the
// message after the answer. It is how a receiver with ReadSpinAwaitedOnly
// spins at all; a no-op without ReadSpin, before the QP is connected and
// over SCTP.
func (q *QP) AwaitAnswer() {
	// q.conn was set before the state became RTS (see PostSend).
	if q.State() == StateRTS {
		q.conn.l.awaitAnswer()
	}
}

// Uncork undoes a Cork; the last one transmits what was posted meanwhile,
// if anything was.
func (q *QP) Uncork() {
	if q.corks.Add(-1) != 0 || !q.corked.Swap(false) {
		return
	}
	// A connection that is closing still sends what was posted.
	if s := q.State(); s == StateRTS || s == StateClosing {
		q.conn.post()
	}
}

// PostRecv queues a receive buffer for one incoming Send. Receives may be
// posted before the QP connects.
func (q *QP) PostRecv(wr *RecvWR) error {
	if s := q.State(); s != StateIdle && s != StateRTS {
		return fmt.Errorf("%w: PostRecv in state %v", ErrQPState, s)
	}
	if len(wr.SGL) > MaxSGE {
		return ErrTooManySGE
	}
	w := recvWQE{id: wr.ID, nsge: uint8(len(wr.SGL))}
	var n uint64
	for i, s := range wr.SGL {
		w.sgl[i] = s
		n += uint64(s.Len)
	}
	if n > 1<<32-1 {
		return ErrMessageSize
	}
	w.length = uint32(n)
	r := &q.rq
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.flushed.Load() {
		// The receive queue has been flushed: nothing would complete it.
		return fmt.Errorf("%w: PostRecv in state %v", ErrQPState, q.State())
	}
	t := r.tail.Load()
	if t-r.head.Load() > r.mask {
		return ErrQueueFull
	}
	r.slots[t&r.mask] = w
	r.tail.Store(t + 1)
	return nil
}

// takeInflight records a send work request the sender has taken.
func (q *QP) takeInflight(w *sendWQE) int {
	q.sqmu.Lock()
	defer q.sqmu.Unlock()
	i := (q.inHead + q.inLen) % len(q.inflight)
	op := w.op.wcOpcode()
	q.inflight[i] = inflightWR{id: w.id, op: op, bytes: w.length}
	// A Quiet request's answer arrives on the receive CQ: its completion
	// stays quiet only in that same CQ, and only if no completion came
	// there between now (before the request goes out) and its own.
	if w.quiet && q.scq == q.rcq {
		q.inflight[i].quiet, q.inflight[i].since = true, q.scq.r.Loud()
	}
	q.inLen++
	return i
}

// completeInflight marks the taken request at index i done and delivers
// every completion that is now in order.
func (q *QP) completeInflight(i int, st Status) {
	q.completeHeld(i, st, false)
}

// completeHeld is completeInflight; with hold (the receiver's), the
// completions are queued as pushHeld queues them, and it reports whether
// any was.
func (q *QP) completeHeld(i int, st Status, hold bool) (held bool) {
	q.sqmu.Lock()
	defer q.sqmu.Unlock()
	q.inflight[i].done, q.inflight[i].status = true, st
	return q.deliverLocked(hold)
}

func (q *QP) deliverLocked(hold bool) (held bool) {
	for q.inLen > 0 && q.inflight[q.inHead].done {
		w := &q.inflight[q.inHead]
		wc := WC{WRID: w.id, Status: w.status, Op: w.op, ByteLen: w.bytes, QPN: q.qpn}
		if w.status != StatusSuccess {
			wc.ByteLen = 0
		}
		q.inHead = (q.inHead + 1) % len(q.inflight)
		q.inLen--
		q.sqCount.Add(-1)
		var err error
		if hold && !w.quiet {
			var h bool
			h, err = q.scq.pushHeld(wc)
			held = held || h
		} else {
			err = q.scq.pushQuiet(wc, w.quiet, w.since)
		}
		if err != nil && wc.Status == StatusSuccess {
			go q.fail(fmt.Errorf("iwarp: send CQ: %w", err))
		}
	}
	return held
}

// pushRecv delivers a receive completion.
func (q *QP) pushRecv(wc WC) {
	wc.QPN = q.qpn
	if err := q.rcq.push(wc); err != nil && wc.Status == StatusSuccess {
		go q.fail(fmt.Errorf("iwarp: receive CQ: %w", err))
	}
}

// pushRecvHeld is pushRecv for the receiver (CQ.pushHeld): it reports
// whether the completion waits for the receiver's release.
func (q *QP) pushRecvHeld(wc WC) bool {
	wc.QPN = q.qpn
	held, err := q.rcq.pushHeld(wc)
	if err != nil && wc.Status == StatusSuccess {
		go q.fail(fmt.Errorf("iwarp: receive CQ: %w", err))
	}
	return held
}

// fail moves the QP out of Full Operation for reason, once: the engine
// stops, and when both its goroutines have ended every outstanding work
// request is flushed and Done is closed. A stream that already ended
// gracefully keeps its nil Err.
func (q *QP) fail(reason error) {
	q.failOnce.Do(func() {
		q.mu.Lock()
		c := q.conn
		if c != nil && q.State() == StateError {
			// Both engine goroutines ended on a graceful close before any
			// failure (only the reaper sets StateError then): there is
			// nothing to stop and no reason to record.
			q.mu.Unlock()
			return
		}
		var oe *net.OpError
		if errors.As(reason, &oe) && mpa.CodeOf(reason) == 0 {
			// A socket operation failed (a write that met a reset, say):
			// whichever goroutine saw it first, the LLP is lost.
			// (One %w: mpa.CodeOf follows single-error Unwrap chains.)
			reason = fmt.Errorf("%w: %v", mpa.ErrLLPLost, reason)
		}
		q.err = reason
		if c == nil {
			// No Connect or Accept in progress may attach a stream to a
			// QP that is being flushed.
			q.closing = true
		}
		q.mu.Unlock()
		if QPState(q.state.Load()) != StateTerminate {
			q.state.Store(uint32(StateError))
		}
		if c == nil {
			q.state.Store(uint32(StateError))
			q.flush()
			close(q.done)
			return
		}
		c.stopEngine()
	})
}

// flush completes every outstanding work request with StatusFlushed (or
// the status already recorded for it). It is called once, when nothing
// else takes from the queues any more; PostSend and PostRecv see flushed
// afterwards.
func (q *QP) flush() {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.flushed.Store(true)
	q.sqmu.Lock()
	for k := 0; k < q.inLen; k++ {
		w := &q.inflight[(q.inHead+k)%len(q.inflight)]
		if !w.done {
			w.done, w.status = true, StatusFlushed
		}
	}
	q.deliverLocked(false)
	q.sqmu.Unlock()
	q.flushSendQueueLocked()
	r := &q.rq
	r.mu.Lock()
	for h := r.head.Load(); h != r.tail.Load(); h++ {
		if w := &r.slots[h&r.mask]; !w.failed {
			q.rcq.push(WC{WRID: w.id, Status: StatusFlushed, Op: WCRecv, QPN: q.qpn})
		}
		r.head.Store(h + 1)
	}
	r.mu.Unlock()
}

// flushSendQueueLocked completes the send work requests no sender took
// with StatusFlushed; flushMu held.
func (q *QP) flushSendQueueLocked() {
	for {
		w, ok := q.sq.Poll()
		if !ok {
			return
		}
		q.sqCount.Add(-1)
		op := w.op.wcOpcode()
		q.scq.push(WC{WRID: w.id, Status: StatusFlushed, Op: op, QPN: q.qpn})
	}
}

// Close tears the QP down abortively (use Disconnect first for a graceful
// close) and waits until every work request has completed.
func (q *QP) Close() error {
	q.mu.Lock()
	q.closing = true
	c := q.conn
	q.mu.Unlock()
	q.fail(ErrClosed)
	if c != nil {
		c.abortLinger()
	}
	<-q.done
	q.dev.removeQP(q)
	return nil
}
