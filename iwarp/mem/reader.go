package mem

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// MaxHeld is how many distinct regions one critical section may hold.
const MaxHeld = 8

// Reader is one goroutine's right to use region memory on the data path.
// The goroutine brackets each use with Enter and Exit (a critical section);
// every region that Check hands out memory of is held (published in one of
// the Reader's hazard slots) until Exit, and Deregister waits until no Reader
// holds the region. A Reader belongs to one goroutine; sections do not nest.
type Reader struct {
	// held are the hazard slots: written by the owner, read by Deregister.
	held   [MaxHeld]atomic.Pointer[region]
	n      int // slots in use in this section
	t      *Table
	active bool
	closed bool
	_      [128 - MaxHeld*8 - 24]byte // one Reader per 128 bytes: no false sharing
}

// errInside is the panic of a misused Reader: an engine bug that would void
// the memory-safety contract.
var errInside = errors.New("mem: Reader used outside Enter/Exit, Enter nested, or more than MaxHeld regions held")

// NewReader returns a Reader of t for one goroutine. Close it when the
// goroutine is done with region memory.
func (t *Table) NewReader() *Reader {
	r := &Reader{t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	var rs []*Reader
	if p := t.readers.Load(); p != nil {
		rs = slices.Clone(*p)
	}
	rs = append(rs, r)
	t.readers.Store(&rs)
	return r
}

// Close unregisters the Reader. It must not be inside a critical section.
func (r *Reader) Close() error {
	if r.active {
		return errors.New("mem: Reader closed inside a critical section")
	}
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	p := t.readers.Load()
	rs := slices.DeleteFunc(slices.Clone(*p), func(x *Reader) bool { return x == r })
	t.readers.Store(&rs)
	return nil
}

// Enter opens a critical section.
func (r *Reader) Enter() {
	if r.active || r.closed {
		panic(errInside)
	}
	r.active = true
}

// Free returns how many more distinct regions this section can hold: a
// caller that batches many Checks in one section stops at zero.
func (r *Reader) Free() int { return MaxHeld - r.n }

// Exit closes the critical section and releases the regions it held; slices
// from Check must not be used after it.
func (r *Reader) Exit() {
	for i := range r.n {
		// Sequentially consistent store: every use of the memory is
		// ordered before it, and so before Deregister seeing it.
		r.held[i].Store(nil)
	}
	r.n = 0
	r.active = false
}

// hold publishes reg in a hazard slot unless this section holds it already,
// then confirms that s still names it. If not (invalidated or deregistered
// meanwhile), Deregister may have missed the slot, so it is released again.
func (r *Reader) hold(s *atomic.Pointer[region], reg *region) bool {
	for i := range r.n {
		if r.held[i].Load() == reg { // our own slot: a plain load in effect
			return true
		}
	}
	if r.n == len(r.held) {
		panic(errInside)
	}
	r.held[r.n].Store(reg)
	if s.Load() != reg {
		r.held[r.n].Store(nil)
		return false
	}
	r.n++
	return true
}

// quiesce waits until no Reader holds any of regs, which must be unreachable
// (no table entry names them) so that no new hold can succeed.
func (t *Table) quiesce(ctx context.Context, regs []*region) error {
	p := t.readers.Load()
	if p == nil {
		return nil
	}
	// Readers added after this load hold nothing of regs: their holds
	// follow the load, which follows the regs' removal.
	for _, r := range *p {
		for i := range r.held {
			for spin := 0; ; spin++ {
				h := r.held[i].Load()
				if h == nil || !slices.Contains(regs, h) {
					break
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				backoff(spin)
			}
		}
	}
	return nil
}

// backoff yields for the first spins, then sleeps for up to a millisecond.
func backoff(spin int) {
	if spin < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Microsecond << min(spin-64, 10))
}
