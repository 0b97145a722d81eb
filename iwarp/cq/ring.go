package cq

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// MaxCapacity is the largest capacity of a Ring.
const MaxCapacity = 1 << 30

// slot is one cell of the ring. seq says whose turn it is: pos while free for
// the producer of position pos, pos+1 once filled for its consumer.
type slot[T any] struct {
	seq       atomic.Uint64
	solicited bool
	val       T
}

type pad [64]byte

// Ring is a bounded lock-free multi-producer multi-consumer queue of
// completions, after Dmitry Vyukov's bounded MPMC queue: producers and
// consumers claim positions with a CAS and hand each slot over through its
// sequence number. Its capacity is a power of two.
type Ring[T any] struct {
	_   pad
	enq atomic.Uint64 // next position to fill
	_   pad
	deq atomic.Uint64 // next position to drain
	_   pad

	// Read-mostly by producers.
	mask   uint64
	slots  []slot[T]
	nwait  atomic.Int32 // waiters linked, see notify.go
	closed atomic.Bool
	_      pad

	// Solicited completions pushed and polled, for solicited-only waits.
	solPushed atomic.Uint64
	solPolled atomic.Uint64
	// loud counts Pushes (not PushQuiets), for PushQuiet's since.
	loud atomic.Uint64
	_    pad

	mu    sync.Mutex // guards the waiter list
	head  *waiter
	tail  *waiter
	armed waiter        // the ring's own notification, see Arm
	done  chan struct{} // closed by Close
}

// New returns an empty ring that holds at least capacity completions: the
// capacity is rounded up to a power of two (2 at least).
func New[T any](capacity int) (*Ring[T], error) {
	if capacity < 1 || capacity > MaxCapacity {
		return nil, fmt.Errorf("%w: %d (want 1 to %d)", ErrCapacity, capacity, MaxCapacity)
	}
	n := uint64(1) << bits.Len(uint(max(capacity, 2)-1))
	r := &Ring[T]{mask: n - 1, slots: make([]slot[T], n), done: make(chan struct{})}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	r.armed.c = make(chan struct{}, 1)
	return r, nil
}

// Cap returns the ring's capacity.
func (r *Ring[T]) Cap() int { return len(r.slots) }

// Len returns the number of completions in the ring, counting those whose
// producers are still writing them; a snapshot under concurrency.
func (r *Ring[T]) Len() int {
	deq := r.deq.Load()
	enq := r.enq.Load()
	if enq < deq {
		return 0
	}
	return int(enq - deq)
}

// Push queues v; solicited marks a completion that wakes solicited-only
// waiters too (the engine sets it for receives with the Solicited Event bit
// and for unsuccessful completions, as verbs do). It returns ErrOverrun when
// the ring is full and ErrClosed once it is closed. Lock-free unless a
// consumer is waiting, when it takes a short lock to wake exactly one.
func (r *Ring[T]) Push(v T, solicited bool) error {
	if err := r.put(v, solicited); err != nil {
		return err
	}
	// After the hand-over and before the waiter check: see PushQuiet.
	r.loud.Add(1)
	// Sequentially consistent after the hand-over: a waiter that linked
	// itself after this load sees the completion when it checks again.
	if r.nwait.Load() != 0 {
		r.wake()
	}
	return nil
}

// PushHeld queues v as Push does but wakes no one yet: its producer hands
// the ring to an inline consumer, which polls it empty, or calls Wake. It
// counts as a Push for PushQuiet.
func (r *Ring[T]) PushHeld(v T, solicited bool) error {
	if err := r.put(v, solicited); err != nil {
		return err
	}
	r.loud.Add(1)
	return nil
}

// Wake wakes a waiter whose condition a queued completion meets: the
// wake-up a PushHeld left out.
func (r *Ring[T]) Wake() {
	if r.nwait.Load() != 0 {
		r.wake()
	}
}

// Loud returns how many Pushes there have been: the since of a PushQuiet.
func (r *Ring[T]) Loud() uint64 { return r.loud.Load() }

// PushQuiet queues v, not solicited, without waking anyone, unless a Push
// came since Loud returned since. It is for a completion whose consumer
// is woken by a later one anyway (a request's, before its answer's): if
// that later one was pushed before v, the consumer may have taken it and
// gone back to sleep without v, so v wakes it; if it is pushed after v,
// its own wake-up finds v queued. A consumer that polls, waits or arms
// after v is queued sees v at once.
func (r *Ring[T]) PushQuiet(v T, since uint64) error {
	if err := r.put(v, false); err != nil {
		return err
	}
	// Both loads after the hand-over, sequentially consistent: a Push
	// whose count this load misses comes later, and its waiter check
	// then finds v queued.
	if r.loud.Load() != since && r.nwait.Load() != 0 {
		r.wake()
	}
	return nil
}

// put queues v for the consumer.
func (r *Ring[T]) put(v T, solicited bool) error {
	if r.closed.Load() {
		return ErrClosed
	}
	pos := r.enq.Load()
	var s *slot[T]
claim:
	for {
		s = &r.slots[pos&r.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if r.enq.CompareAndSwap(pos, pos+1) {
				break claim
			}
			pos = r.enq.Load()
		case int64(seq-pos) < 0: // the slot still holds the completion of pos-cap
			return ErrOverrun
		default: // another producer claimed pos
			pos = r.enq.Load()
		}
	}
	s.val, s.solicited = v, solicited
	s.seq.Store(pos + 1) // hand over to the consumer
	if solicited {
		r.solPushed.Add(1)
	}
	return nil
}

// Poll takes the oldest completion, reporting false when the ring is empty.
// Completions still queued when the ring is closed can be polled.
func (r *Ring[T]) Poll() (T, bool) {
	var zero T
	pos := r.deq.Load()
	var s *slot[T]
claim:
	for {
		s = &r.slots[pos&r.mask]
		switch seq := s.seq.Load(); {
		case seq == pos+1:
			if r.deq.CompareAndSwap(pos, pos+1) {
				break claim
			}
			pos = r.deq.Load()
		case int64(seq-(pos+1)) < 0: // not filled yet: empty
			return zero, false
		default: // another consumer took pos
			pos = r.deq.Load()
		}
	}
	v, solicited := s.val, s.solicited
	s.val = zero                            // let the GC have what v points to
	s.seq.Store(pos + uint64(len(r.slots))) // free for the producer of pos+cap
	if solicited {
		r.solPolled.Add(1)
	}
	return v, true
}

// empty reports whether Poll would find nothing right now.
func (r *Ring[T]) empty() bool {
	pos := r.deq.Load()
	return r.slots[pos&r.mask].seq.Load() != pos+1
}

// solicitedQueued reports whether a solicited completion may be in the ring.
func (r *Ring[T]) solicitedQueued() bool {
	polled := r.solPolled.Load() // first: both only grow
	return r.solPushed.Load() > polled
}
