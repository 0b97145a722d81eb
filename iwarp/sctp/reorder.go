package sctp

import "errors"

// MaxInFlight is the most chunks a sender has on one stream without
// acknowledgment, and the widest gap a receiver accepts between the next
// DDP-SSN it expects and one that arrives (section 10): with at most 32767
// in flight, a 16-bit DDP-SSN orders them "without special logic".
const MaxInFlight = 32767

// Errors of the receive reordering.
var (
	// ErrSSNInvalid is a DDP-SSN that no count of unreceived chunks
	// explains (section 10's validity check): one already delivered, a
	// duplicate of one held, or one beyond the 32767-chunk window.
	ErrSSNInvalid = errors.New("sctp: invalid DDP-SSN")
	// ErrReorderFull is an out-of-order chunk with no room left to hold
	// it: the receiver does not allocate on the peer's say-so.
	ErrReorderFull = errors.New("sctp: too many chunks out of order")
)

// Reorder puts the chunks of one direction of a DDP Stream Session back in
// DDP-SSN order (section 10: every chunk is sent unordered, and the
// receiver "MUST NOT rely upon the SCTP TSN"). Each DDP-SSN is validated
// before anything is held for it; at most limit chunks are held. It does
// not allocate once its limit is reached.
type Reorder[T any] struct {
	next  uint16
	held  []heldChunk[T]
	limit int
}

type heldChunk[T any] struct {
	ssn uint16
	v   T
}

// NewReorder returns a Reorder expecting DDP-SSN 0 (6.1) that holds at
// most limit chunks (at least 1: the next one in order).
func NewReorder[T any](limit int) *Reorder[T] {
	limit = max(limit, 1)
	return &Reorder[T]{held: make([]heldChunk[T], 0, limit), limit: limit}
}

// Next returns the DDP-SSN expected next.
func (r *Reorder[T]) Next() uint16 { return r.next }

// Held returns how many chunks wait.
func (r *Reorder[T]) Held() int { return len(r.held) }

// Push validates a received chunk's DDP-SSN and holds it until Pop.
func (r *Reorder[T]) Push(ssn uint16, v T) error {
	if d := ssn - r.next; d > MaxInFlight-1 {
		// Behind next (delivered already) or too far ahead: the gap
		// d is explained by no 32767 chunks in flight.
		return ErrSSNInvalid
	}
	for i := range r.held {
		if r.held[i].ssn == ssn {
			return ErrSSNInvalid
		}
	}
	if len(r.held) == r.limit {
		return ErrReorderFull
	}
	r.held = append(r.held, heldChunk[T]{ssn, v})
	return nil
}

// Pop returns the chunk of the next DDP-SSN, when it has arrived.
func (r *Reorder[T]) Pop() (T, bool) {
	for i := range r.held {
		if r.held[i].ssn == r.next {
			v := r.held[i].v
			last := len(r.held) - 1
			r.held[i] = r.held[last]
			var zero heldChunk[T]
			r.held[last] = zero
			r.held = r.held[:last]
			r.next++
			return v, true
		}
	}
	var zero T
	return zero, false
}

// Drain returns every held chunk (in no particular order) and empties r,
// for their buffers to be recycled.
func (r *Reorder[T]) Drain(f func(T)) {
	for i := range r.held {
		f(r.held[i].v)
		var zero heldChunk[T]
		r.held[i] = zero
	}
	r.held = r.held[:0]
}

// Window is the sender's side of section 10: "the sending DDP must simply
// refrain from sending more than 32767 Data Chunks for a single stream
// without acknowledgment".
type Window struct {
	sent uint64 // chunks handed to SCTP
}

// Sent counts n more chunks handed to SCTP.
func (w *Window) Sent(n int) { w.sent += uint64(n) }

// Total returns the chunks handed to SCTP so far.
func (w *Window) Total() uint64 { return w.sent }

// Room returns how many more chunks may go out when unacked of those sent
// are not yet acknowledged.
func (w *Window) Room(unacked int) int { return max(MaxInFlight-unacked, 0) }
