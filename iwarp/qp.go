package iwarp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp/cq"
	"github.com/ddpstore/ddpstore/iwarp/mem"
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
}

// recvWQE is a posted receive.
type recvWQE struct {
	id     uint64
	nsge   uint8
	sgl    [MaxSGE]SGE
	length uint32
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
	closing  bool
}

// inflightWR is a taken send work request awaiting its completion.
type inflightWR struct {
	id     uint64
	op     WCOpcode
	bytes  uint32
	done   bool
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

// Err returns why the QP left StateRTS (a *TerminateError for Terminates
// sent or received), or nil.
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
	w := sendWQE{id: wr.ID, op: wr.Op, rstag: wr.RemoteSTag, rto: wr.RemoteTO, inv: wr.InvalidateSTag}
	if len(wr.SGL) > MaxSGE {
		return ErrTooManySGE
	}
	if wr.Op > OpRead {
		return fmt.Errorf("iwarp: unknown opcode %d", wr.Op)
	}
	if wr.Op == OpRead && len(wr.SGL) != 1 {
		return ErrReadSGE
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
	select {
	case q.kick <- struct{}{}:
	default:
	}
	return nil
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
	op := WCSend
	switch w.op {
	case OpWrite:
		op = WCWrite
	case OpRead:
		op = WCRead
	}
	q.inflight[i] = inflightWR{id: w.id, op: op, bytes: w.length}
	q.inLen++
	return i
}

// completeInflight marks the taken request at index i done and delivers
// every completion that is now in order.
func (q *QP) completeInflight(i int, st Status) {
	q.sqmu.Lock()
	defer q.sqmu.Unlock()
	q.inflight[i].done, q.inflight[i].status = true, st
	q.deliverLocked()
}

func (q *QP) deliverLocked() {
	for q.inLen > 0 && q.inflight[q.inHead].done {
		w := &q.inflight[q.inHead]
		wc := WC{WRID: w.id, Status: w.status, Op: w.op, ByteLen: w.bytes, QPN: q.qpn}
		if w.status != StatusSuccess {
			wc.ByteLen = 0
		}
		q.inHead = (q.inHead + 1) % len(q.inflight)
		q.inLen--
		q.sqCount.Add(-1)
		if err := q.scq.push(wc); err != nil && wc.Status == StatusSuccess {
			go q.fail(fmt.Errorf("iwarp: send CQ: %w", err))
		}
	}
}

// pushRecv delivers a receive completion.
func (q *QP) pushRecv(wc WC) {
	wc.QPN = q.qpn
	if err := q.rcq.push(wc); err != nil && wc.Status == StatusSuccess {
		go q.fail(fmt.Errorf("iwarp: receive CQ: %w", err))
	}
}

// fail moves the QP out of Full Operation for reason, once: the engine
// stops, and when both its goroutines have ended every outstanding work
// request is flushed and Done is closed.
func (q *QP) fail(reason error) {
	q.failOnce.Do(func() {
		q.mu.Lock()
		q.err = reason
		c := q.conn
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
// the status already recorded for it). Only called once nothing else
// touches the queues.
func (q *QP) flush() {
	q.sqmu.Lock()
	for k := 0; k < q.inLen; k++ {
		w := &q.inflight[(q.inHead+k)%len(q.inflight)]
		if !w.done {
			w.done, w.status = true, StatusFlushed
		}
	}
	q.deliverLocked()
	q.sqmu.Unlock()
	for {
		w, ok := q.sq.Poll()
		if !ok {
			break
		}
		q.sqCount.Add(-1)
		op := WCSend
		switch w.op {
		case OpWrite:
			op = WCWrite
		case OpRead:
			op = WCRead
		}
		q.scq.push(WC{WRID: w.id, Status: StatusFlushed, Op: op, QPN: q.qpn})
	}
	r := &q.rq
	r.mu.Lock()
	for h := r.head.Load(); h != r.tail.Load(); h++ {
		q.rcq.push(WC{WRID: r.slots[h&r.mask].id, Status: StatusFlushed, Op: WCRecv, QPN: q.qpn})
		r.head.Store(h + 1)
	}
	r.mu.Unlock()
}

// Close tears the QP down abortively (use Disconnect first for a graceful
// close) and waits until every work request has completed.
func (q *QP) Close() error {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.fail(ErrClosed)
	<-q.done
	q.dev.removeQP(q)
	return nil
}
