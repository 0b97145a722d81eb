package iwarp

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp/cq"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// DefaultMaxMRs is the size of a Device's STag namespace unless configured.
const DefaultMaxMRs = 1 << 16

// Device is one software RNIC: an STag namespace and the queue pairs,
// completion queues and listeners created on it.
type Device struct {
	mem     *mem.Table
	nextQPN atomic.Uint32

	stats devStats // what its streams did (stats.go)

	mu        sync.Mutex
	qps       map[uint32]*QP
	listeners map[*Listener]struct{}
	closed    bool
}

// NewDevice returns a Device whose STag namespace holds maxMRs regions
// (DefaultMaxMRs when 0).
func NewDevice(maxMRs int) *Device {
	if maxMRs <= 0 {
		maxMRs = DefaultMaxMRs
	}
	return &Device{mem: mem.NewTable(maxMRs), qps: make(map[uint32]*QP), listeners: make(map[*Listener]struct{})}
}

// AllocPD returns a new protection domain.
func (d *Device) AllocPD() mem.PD { return mem.NewPD() }

// Register registers length octets at off of m under pd with the given
// access rights, VA-based (a TO is the virtual address of the octet).
func (d *Device) Register(pd mem.PD, m *mem.Mapping, off, length int, acc mem.Access) (*mem.MR, error) {
	return d.mem.Register(pd, m, off, length, acc, mem.VABased)
}

// RegisterZeroBased is Register with zero-based TOs (TO 0 is the region's
// first octet).
func (d *Device) RegisterZeroBased(pd mem.PD, m *mem.Mapping, off, length int, acc mem.Access) (*mem.MR, error) {
	return d.mem.Register(pd, m, off, length, acc, mem.ZeroBased)
}

// Deregister invalidates mrs and waits until no QP is using their memory.
func (d *Device) Deregister(ctx context.Context, mrs ...*mem.MR) error {
	return d.mem.Deregister(ctx, mrs...)
}

// Invalidate invalidates stag locally: it stops working for the peer at once.
func (d *Device) Invalidate(stag mem.STag, pd mem.PD) mem.Fault { return d.mem.Invalidate(stag, pd) }

// AllocFastReg creates a fast-register MR over length octets at off of m
// under pd, VA-based, with no valid STag yet: each FastRegister then gives
// a window of it, with at most the access maxAcc, an STag of the same
// index and a fresh key (the verbs' Fast-Register, IB_WR_REG_MR).
func (d *Device) AllocFastReg(pd mem.PD, m *mem.Mapping, off, length int, maxAcc mem.Access) (*mem.MR, error) {
	return d.mem.RegisterFast(pd, m, off, length, maxAcc, mem.VABased)
}

// FastRegister makes octets [off, off+n) of the fast-register MR mr (whose
// STag must be invalid) its region with the access acc and returns its new
// STag; mr.BaseTO() is the window's first TO. It allocates nothing.
func (d *Device) FastRegister(mr *mem.MR, off, n int, acc mem.Access) (mem.STag, error) {
	return d.mem.FastRegister(mr, off, n, acc)
}

// InvalidateWait invalidates mr's STag locally (if it is still valid) and
// waits until no QP is placing into or sending from its memory, or ctx is
// done.
func (d *Device) InvalidateWait(ctx context.Context, mr *mem.MR) error {
	d.mem.Invalidate(mr.STag(), mr.PD())
	return d.mem.Quiesce(ctx, mr)
}

// Close closes every Listener and QP of the Device.
func (d *Device) Close() error {
	d.mu.Lock()
	d.closed = true
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	lns := make([]*Listener, 0, len(d.listeners))
	for l := range d.listeners {
		lns = append(lns, l)
	}
	d.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	for _, q := range qps {
		q.Close()
	}
	return nil
}

// addListener tracks l so that Close can close it.
func (d *Device) addListener(l *Listener) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.listeners[l] = struct{}{}
	return nil
}

func (d *Device) removeListener(l *Listener) {
	d.mu.Lock()
	delete(d.listeners, l)
	d.mu.Unlock()
}

func (d *Device) addQP(q *QP) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.qps[q.qpn] = q
	return nil
}

func (d *Device) removeQP(q *QP) {
	d.mu.Lock()
	delete(d.qps, q.qpn)
	d.mu.Unlock()
}

// CQ is a completion queue. Completions are pushed lock-free by the QPs'
// engine goroutines and polled by the application.
type CQ struct {
	r *cq.Ring[WC]
	// inline is the consumer the receiver runs itself (SetInline), or nil.
	inline atomic.Pointer[func() bool]
}

// NewCQ returns a completion queue with room for at least depth completions.
// A QP whose completions overrun it goes to the error state.
func (d *Device) NewCQ(depth int) (*CQ, error) {
	r, err := cq.New[WC](depth)
	if err != nil {
		return nil, err
	}
	return &CQ{r: r}, nil
}

// Poll moves up to len(wcs) completions into wcs and returns how many.
func (c *CQ) Poll(wcs []WC) int {
	n := 0
	for n < len(wcs) {
		wc, ok := c.r.Poll()
		if !ok {
			break
		}
		wcs[n] = wc
		n++
	}
	return n
}

// Arm asks for one notification on Notify's channel at the next completion
// (or the next solicited or failed one), as ibv_req_notify_cq does.
func (c *CQ) Arm(solicitedOnly bool) error { return c.r.Arm(solicitedOnly) }

// Notify returns the channel that armed notifications arrive on.
func (c *CQ) Notify() <-chan struct{} { return c.r.Notify() }

// Wait blocks until a completion (or a solicited or failed one) is ready
// to poll, ctx is done, or the CQ is closed.
func (c *CQ) Wait(ctx context.Context, solicitedOnly bool) error {
	return c.r.Wait(ctx, solicitedOnly)
}

// SetInline gives the CQ an inline consumer, or takes it away (nil). A QP's
// receiver queues the completions of what it received without waking
// anyone, and before it next reads from the stream, at a point where it
// holds nothing of the engine's, it calls fn. fn reports whether it
// polled the CQ empty: it handled the completions on the receiver's
// goroutine, so that the application's answer leaves without a hand-over
// to another goroutine (at queue depth 1 most of a small I/O's overhead on
// this project's machines). When fn returns false (its consumer is busy
// elsewhere) the receiver wakes the waiters, as for any completion. fn
// must not wait for anything the receiver delivers, and must not close
// the QP or deregister memory other than by posting; Arm's level
// triggering lets it Disarm while it polls and Arm again when it stops.
func (c *CQ) SetInline(fn func() bool) {
	if fn == nil {
		c.inline.Store(nil)
		return
	}
	c.inline.Store(&fn)
}

// Disarm withdraws an Arm not yet notified (cq.Ring.Disarm).
func (c *CQ) Disarm() { c.r.Disarm() }

// Close wakes waiters; completions already queued can still be polled.
func (c *CQ) Close() error { return c.r.Close() }

// push queues a completion; failed ones wake solicited-only waiters too.
func (c *CQ) push(wc WC) error {
	return c.r.Push(wc, wc.Solicited || wc.Status != StatusSuccess)
}

// pushHeld is push for the receiver: with an inline consumer it wakes no
// one and reports that the receiver must release the CQ before it reads
// again.
func (c *CQ) pushHeld(wc WC) (held bool, err error) {
	if c.inline.Load() == nil {
		return false, c.push(wc)
	}
	return true, c.r.PushHeld(wc, wc.Solicited || wc.Status != StatusSuccess)
}

// release follows pushHeld: it runs the inline consumer (when inline) and,
// unless that polled the CQ empty, wakes its waiters. It reports whether
// the inline consumer took the completions.
func (c *CQ) release(inline bool) bool {
	if inline {
		if fn := c.inline.Load(); fn != nil && (*fn)() {
			return true
		}
	}
	c.r.Wake()
	return false
}

// pushQuiet is push, without waking anyone for a successful completion
// when quiet (SendWR.Quiet), unless a completion was pushed since the
// ring's Loud count was since (cq.Ring.PushQuiet).
func (c *CQ) pushQuiet(wc WC, quiet bool, since uint64) error {
	if quiet && wc.Status == StatusSuccess {
		return c.r.PushQuiet(wc, since)
	}
	return c.push(wc)
}
