// Package iserconn is one iSER connection's plumbing, shared by the target
// and the initiator: a queue pair with its protection domain and completion
// queue, the registered buffers that iSCSI PDUs are received into and sent
// from (each Send is one iSER header, one BHS and a data segment, RFC 7145
// section 9.1), and the loop that waits for completions.
package iserconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
)

// Overhead is the octets in front of a PDU's data segment in a Send: the
// iSER header and the BHS (no AHS: neither side sends one).
const Overhead = iser.HeaderLen + iscsi.BHSLen

// Config sizes a connection's buffers.
type Config struct {
	// RecvSlots receive buffers of Overhead+RecvData octets are posted.
	RecvSlots, RecvData int
	// SendSlots send buffers of Overhead+SendData octets.
	SendSlots, SendData int
	// SendWRs bounds the send queue (Sends, RDMA Writes and Reads).
	SendWRs int
	// Extra is an application region registered with the connection's PD
	// (the initiator's data buffers, the target's WRITE staging): Extra
	// octets of lazily faulted memory with ExtraAccess.
	Extra       int
	ExtraAccess mem.Access
	// ExtraMapping, when set, is registered as the application region
	// instead of a new mapping of Extra octets; it outlives the Conn (the
	// initiator keeps its buffers across reconnections).
	ExtraMapping *mem.Mapping
}

// Work request IDs carry their kind in the top byte.
const (
	kindShift = 56
	kindRecv  = 1
	kindSend  = 2 // a PDU Send; low bits: send slot
	kindUser  = 3 // the application's RDMA Reads and Writes
)

// UserID tags an application work request ID so that Loop hands its
// completion to Handler.Completed. id must fit in 56 bits.
func UserID(id uint64) uint64 { return kindUser<<kindShift | id&(1<<kindShift-1) }

// Conn is one iSER connection's QP and buffers.
type Conn struct {
	Dev *iwarp.Device
	PD  mem.PD
	QP  *iwarp.QP
	CQ  *iwarp.CQ

	rx, tx, extra       *mem.Mapping
	rxMR, txMR, extraMR *mem.MR
	recvLen, sendLen    int
	cfg                 Config
	wcs                 [64]iwarp.WC
	closed              bool

	// mu is held while a handler runs: by Loop, or by the QP's receiver
	// running Loop's work inline (inline). It guards h, looping and
	// failed, and wcs.
	mu      sync.Mutex
	h       Handler
	looping bool
	failed  error         // inline's handler error, for Loop to return
	kick    chan struct{} // wakes Loop for failed
}

// New creates the connection's PD, CQ and QP on dev, registers its
// buffers and posts every receive, ready for Connect or Accept.
func New(dev *iwarp.Device, cfg Config) (c *Conn, err error) {
	if cfg.RecvSlots <= 0 || cfg.SendSlots <= 0 || cfg.RecvData < 0 || cfg.SendData < 0 {
		return nil, fmt.Errorf("iserconn: bad buffer config %+v", cfg)
	}
	if cfg.SendWRs < cfg.SendSlots {
		cfg.SendWRs = cfg.SendSlots
	}
	c = &Conn{Dev: dev, PD: dev.AllocPD(), cfg: cfg,
		recvLen: Overhead + cfg.RecvData, sendLen: Overhead + cfg.SendData}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.CQ, err = dev.NewCQ(cfg.RecvSlots + cfg.SendWRs); err != nil {
		return nil, err
	}
	if c.QP, err = dev.NewQP(iwarp.QPConfig{PD: c.PD, SendCQ: c.CQ, RecvCQ: c.CQ,
		MaxSendWR: cfg.SendWRs, MaxRecvWR: cfg.RecvSlots}); err != nil {
		return nil, err
	}
	if c.rx, c.rxMR, err = c.region(cfg.RecvSlots*c.recvLen, mem.LocalWrite, true); err != nil {
		return nil, err
	}
	if c.tx, c.txMR, err = c.region(cfg.SendSlots*c.sendLen, 0, true); err != nil {
		return nil, err
	}
	switch {
	case cfg.ExtraMapping != nil:
		if c.extraMR, err = dev.Register(c.PD, cfg.ExtraMapping, 0, cfg.ExtraMapping.Len(), cfg.ExtraAccess); err != nil {
			return nil, err
		}
	case cfg.Extra > 0:
		if c.extra, c.extraMR, err = c.region(cfg.Extra, cfg.ExtraAccess, false); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.RecvSlots; i++ {
		if err = c.postRecv(i); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Conn) region(n int, acc mem.Access, prefault bool) (*mem.Mapping, *mem.MR, error) {
	var m *mem.Mapping
	var err error
	if prefault {
		m, err = mem.Anonymous(n)
	} else {
		m, err = mem.AnonymousLazy(n)
	}
	if err != nil {
		return nil, nil, err
	}
	mr, err := c.Dev.Register(c.PD, m, 0, n, acc)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, mr, nil
}

func (c *Conn) postRecv(slot int) error {
	return c.QP.PostRecv(&iwarp.RecvWR{ID: kindRecv<<kindShift | uint64(slot),
		SGL: []iwarp.SGE{iwarp.SGEOf(c.rxMR, slot*c.recvLen, c.recvLen)}})
}

// ExtraMR returns the application region (nil when Config.Extra is 0).
func (c *Conn) ExtraMR() *mem.MR { return c.extraMR }

// SendSlots returns the number of send buffers.
func (c *Conn) SendSlots() int { return c.cfg.SendSlots }

// SendBuf returns send buffer slot: the iSER header goes at [0, 28), the
// BHS at [28, 76), the data segment after.
func (c *Conn) SendBuf(slot int) []byte {
	b := c.txMR.Bytes()
	return b[slot*c.sendLen : (slot+1)*c.sendLen]
}

// Post posts an application RDMA Write or Read of one local SGE, whose
// completion Loop hands to Handler.Completed with id.
func (c *Conn) Post(op iwarp.Opcode, id uint64, local iwarp.SGE, stag mem.STag, to uint64) error {
	sgl := [1]iwarp.SGE{local}
	return c.QP.PostSend(&iwarp.SendWR{ID: UserID(id), Op: op, SGL: sgl[:], RemoteSTag: stag, RemoteTO: to})
}

// PostPDU sends the first n octets of send buffer slot as one Send, with
// Invalidate of inv when it is not 0 (RFC 7145 section 7.3.5), and a
// completion that Loop reports as a send-slot release.
func (c *Conn) PostPDU(slot, n int, inv mem.STag) error { return c.postPDU(slot, n, inv, false) }

// PostCommand is PostPDU for a PDU whose answer follows (an iSCSI command,
// RFC 7145 section 7.3.1): its Send's completion does not wake Loop, which
// reports it with the answer (iwarp.SendWR.Quiet).
func (c *Conn) PostCommand(slot, n int) error { return c.postPDU(slot, n, 0, true) }

func (c *Conn) postPDU(slot, n int, inv mem.STag, quiet bool) error {
	if n > c.sendLen {
		return fmt.Errorf("iserconn: PDU of %d octets exceeds the %d-octet send buffer", n, c.sendLen)
	}
	sgl := [1]iwarp.SGE{iwarp.SGEOf(c.txMR, slot*c.sendLen, n)}
	wr := iwarp.SendWR{ID: kindSend<<kindShift | uint64(slot), Op: iwarp.OpSend, SGL: sgl[:], Quiet: quiet}
	if inv != 0 {
		wr.Op, wr.InvalidateSTag = iwarp.OpSendInv, inv
	}
	return c.QP.PostSend(&wr)
}

// Handler receives what Loop polls.
type Handler interface {
	// PDU is a received iSER message (header, BHS, data segment). msg is
	// valid until PDU returns; its receive is posted again after.
	PDU(msg []byte) error
	// SendDone reports that send buffer slot may be reused.
	SendDone(slot int, st iwarp.Status)
	// Completed reports an application work request tagged with UserID.
	Completed(id uint64, wc *iwarp.WC)
	// Idle is called when the CQ is empty, before Loop sleeps: the place
	// to post work that waited for resources.
	Idle() error
}

// InvalidateHandler is a Handler that is told, just before PDU, which of
// its STags the message's Send with Invalidate invalidated (RFC 7145
// section 7.3.3), so that it can check that it was the STag of the task
// the PDU answers.
type InvalidateHandler interface {
	Handler
	Invalidated(stag mem.STag)
}

// ErrStopped is returned by Loop when wake reports a stop request.
var ErrStopped = errors.New("iserconn: stopped")

// Poll handles every completion queued now and reports how many there were.
func (c *Conn) Poll(h Handler) (int, error) {
	total := 0
	for {
		n := c.CQ.Poll(c.wcs[:])
		for i := 0; i < n; i++ {
			if err := c.handle(h, &c.wcs[i]); err != nil {
				return total, err
			}
		}
		total += n
		if n < len(c.wcs) {
			return total, nil
		}
	}
}

func (c *Conn) handle(h Handler, wc *iwarp.WC) error {
	id := wc.WRID & (1<<kindShift - 1)
	switch wc.WRID >> kindShift {
	case kindRecv:
		if wc.Status != iwarp.StatusSuccess {
			return c.why(fmt.Errorf("iserconn: receive: %v", wc.Status))
		}
		if wc.Invalidated != 0 {
			if ih, ok := h.(InvalidateHandler); ok {
				ih.Invalidated(wc.Invalidated)
			}
		}
		off := int(id) * c.recvLen
		err := h.PDU(c.rxMR.Bytes()[off : off+int(wc.ByteLen)])
		if err != nil {
			return err
		}
		if err := c.postRecv(int(id)); err != nil && !errors.Is(err, iwarp.ErrQPState) {
			return err
		}
		// A connection that is closing takes no more receives; Loop
		// ends when the QP is done.
		return nil
	case kindSend:
		h.SendDone(int(id), wc.Status)
		if wc.Status != iwarp.StatusSuccess {
			return c.why(fmt.Errorf("iserconn: send: %v", wc.Status))
		}
	default:
		h.Completed(id, wc)
	}
	return nil
}

// Loop polls completions into h until the QP fails, ctx is done, h returns
// an error, or wake delivers false. A true on wake, or a tick, just makes
// Loop call Idle (another goroutine queued work for it, or a timer is due).
//
// What the handler posts while Loop handles a batch of completions goes
// out together once the batch is handled (QP.Cork): a response's RDMA
// Write and its Send in one write, made by this goroutine when the QP's
// sender is idle.
func (c *Conn) Loop(ctx context.Context, h Handler, wake <-chan bool, tick <-chan time.Time) error {
	c.mu.Lock()
	c.h, c.looping, c.failed = h, true, nil
	if c.kick == nil {
		c.kick = make(chan struct{}, 1)
	}
	c.mu.Unlock()
	c.CQ.SetInline(c.inline)
	defer func() {
		c.CQ.SetInline(nil)
		c.mu.Lock()
		c.looping, c.h = false, nil
		c.mu.Unlock()
	}()
	for {
		n, err := c.locked(true, true)
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if err := c.CQ.Arm(false); err != nil {
			return c.why(err)
		}
		if n, err = c.locked(true, false); err != nil || n > 0 {
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-c.CQ.Notify():
		case <-c.kick:
		case w := <-wake:
			if !w {
				return ErrStopped
			}
		case <-tick:
			if _, err := c.locked(false, true); err != nil {
				return err
			}
		case <-c.QP.Done():
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.failed != nil {
				return c.failed
			}
			if _, err := c.Poll(h); err != nil {
				return err
			}
			return c.why(nil)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// locked is corked under mu, after the error of an inline run.
func (c *Conn) locked(poll, idle bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return 0, c.failed
	}
	return c.corked(c.h, poll, idle)
}

// inline is the CQ's inline consumer (iwarp.CQ.SetInline): on the QP's
// receiver, it does what Loop would do on being notified, unless Loop is
// busy handling already. Loop, armed and waiting, stays so: inline
// disarms the CQ while it handles (what it posts completes into the same
// CQ) and arms it again when the CQ is empty.
func (c *Conn) inline() bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	if !c.looping || c.failed != nil {
		return false
	}
	c.CQ.Disarm()
	for {
		n, err := c.corked(c.h, true, false)
		if err != nil {
			c.fail(err)
			return true
		}
		if n == 0 {
			break
		}
	}
	if err := c.CQ.Arm(false); err != nil {
		c.fail(c.why(err))
	}
	return true
}

// fail records inline's error for Loop and wakes it; mu held.
func (c *Conn) fail(err error) {
	c.failed = err
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// corked handles what is queued (poll), then calls Idle (idle), with the
// QP corked: what the handler posts meanwhile leaves in one write.
func (c *Conn) corked(h Handler, poll, idle bool) (n int, err error) {
	c.QP.Cork()
	defer c.QP.Uncork()
	if poll {
		if n, err = c.Poll(h); err != nil {
			return n, err
		}
	}
	if idle {
		err = h.Idle()
	}
	return n, err
}

// why explains the end of the connection: the QP's reason (a Terminate,
// an MPA error) when it has one, else err.
func (c *Conn) why(err error) error {
	if qerr := c.QP.Err(); qerr != nil {
		return qerr
	}
	if err != nil {
		return err
	}
	return iwarp.ErrClosed
}

// Close tears the QP down and releases every buffer.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.QP != nil {
		c.QP.Close()
	}
	var mrs []*mem.MR
	for _, mr := range []*mem.MR{c.rxMR, c.txMR, c.extraMR} {
		if mr != nil {
			mrs = append(mrs, mr)
		}
	}
	err := c.Dev.Deregister(context.Background(), mrs...)
	for _, m := range []*mem.Mapping{c.rx, c.tx, c.extra} {
		if m != nil {
			if e := m.Close(); e != nil && err == nil {
				err = e
			}
		}
	}
	if c.CQ != nil {
		c.CQ.Close()
	}
	return err
}
