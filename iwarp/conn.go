package iwarp

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// outRead is an RDMA Read this end requested and awaits the Response of.
type outRead struct {
	sink     mem.STag
	sinkTO   uint64
	size     uint32
	received uint32
	wr       int  // index of its inflight record
	rtr      bool // the revision-2 ready-to-receive Read, no work request
}

// inRead is an RDMA Read Request from the peer, validated, to be answered.
type inRead struct {
	sink   uint32
	sinkTO uint64
	src    mem.STag
	srcTO  uint64
	size   uint32
}

// conn is the RDMAP Stream of a connected QP: its lower layer and the
// queues between the engine's two goroutines.
type conn struct {
	qp  *QP
	l   llp
	neg mpa.Negotiated

	// ORD: Reads this end requested (the sender produces, the receiver
	// consumes in order).
	reads            []outRead
	readHead, readTl atomic.Uint32
	// IRD: Read Requests to answer (the receiver produces, the sender
	// consumes in order).
	resps            []inRead
	respHead, respTl atomic.Uint32
	firstRx          chan struct{} // closed at the first valid FPDU (RFC 5044 7.1.2 rule 4)
	firstOnce        sync.Once
	termHdr          atomic.Pointer[termInfo] // a Terminate for the sender to send last
	stop             chan struct{}            // closed to stop the engine
	stopOnce         sync.Once
	graceful         atomic.Bool // a graceful close: send what is queued, then FIN
	abort            atomic.Bool // QP.Close: cut linger short
	wg               sync.WaitGroup
	rxDone, txDone   chan struct{}
	stats            connStats

	// The sender's core, run by the sender goroutine and by posters in
	// turn (post): txmu held. direct: posters may run it (set once the
	// stream may carry their messages, for an LLP whose writes never wait).
	tx     *tx
	txmu   sync.Mutex
	direct atomic.Bool
	// rxMsgs counts the messages received (the receiver's), for post.
	rxMsgs atomic.Uint64
	// alwaysDirect: posters write whenever the sender is idle (tests).
	alwaysDirect bool
}

// termInfo is a Terminate this end sends.
type termInfo struct {
	err rdmap.Error
	b   []byte
}

func newConn(q *QP, l llp, neg mpa.Negotiated) *conn {
	ird, ord := int(neg.IRD), int(neg.ORD)
	ird, ord = clampRD(ird), clampRD(ord)
	c := &conn{
		qp: q, l: l, neg: neg,
		reads: make([]outRead, ord+1), resps: make([]inRead, ird),
		firstRx: make(chan struct{}), stop: make(chan struct{}),
		rxDone: make(chan struct{}), txDone: make(chan struct{}),
	}
	return c
}

// clampRD bounds an IRD or ORD to what the engine queues: IRDORDUnspecified
// (no limit stated) becomes 128, as for siw.
func clampRD(v int) int {
	if v <= 0 {
		return 0
	}
	if v >= int(mpa.IRDORDUnspecified) || v > 1024 {
		return 128
	}
	return v
}

// start runs the engine: a receiver, a sender, and the reaper that flushes
// the QP when both have ended, closes the socket and then Done.
func (c *conn) start() {
	dev := &c.qp.dev.stats
	dev.attach(&c.stats)
	c.tx = newTx(c)
	c.wg.Add(2)
	go func() { defer c.wg.Done(); defer close(c.rxDone); c.rxLoop() }()
	go func() { defer c.wg.Done(); defer close(c.txDone); c.txLoop() }()
	go func() {
		c.wg.Wait()
		q := c.qp
		q.state.Store(uint32(StateError))
		q.flush()
		abortive := false
		switch {
		case c.termHdr.Load() != nil:
			c.linger()
		case c.abortive():
			abortive = true
		}
		c.l.close(abortive)
		dev.retire(&c.stats)
		close(q.done)
	}()
}

// terminateGrace bounds how long a write in progress, and then the
// Terminate message, may take once the engine stops.
const terminateGrace = 2 * time.Second

// stopEngine stops both goroutines. With a Terminate pending, a write in
// progress gets terminateGrace to finish so the Terminate can follow it on
// a sound stream; otherwise writes stop at once.
func (c *conn) stopEngine() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.l.setReadDeadline(time.Unix(1, 0))
		if c.termHdr.Load() != nil {
			c.l.setWriteDeadline(time.Now().Add(terminateGrace))
		} else {
			c.l.setWriteDeadline(time.Unix(1, 0))
		}
	})
}

// abortive reports whether the stream ended neither gracefully nor through
// a Terminate (sent or received): QP.Close, a lost connection, a local
// error.
func (c *conn) abortive() bool {
	q := c.qp
	q.mu.Lock()
	err := q.err
	q.mu.Unlock()
	var te *TerminateError
	return err != nil && !errors.As(err, &te)
}

// abortLinger cuts linger short. The flag is set before the deadline, and
// linger checks it after setting its own, so one of them sees the other.
func (c *conn) abortLinger() {
	c.abort.Store(true)
	c.l.setReadDeadline(time.Unix(1, 0))
}

// markFirstRx records that a valid FPDU arrived.
func (c *conn) markFirstRx() { c.firstOnce.Do(func() { close(c.firstRx) }) }

// wake kicks the sender goroutine.
func (c *conn) wake() {
	select {
	case c.qp.kick <- struct{}{}:
	default:
	}
}
