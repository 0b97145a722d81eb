package spin

import (
	"sync"
	"sync/atomic"
	"time"
)

// Deadliner is the part of a connection that Awaited moves: its read
// deadline, which wakes a goroutine that waits in Go's poller.
type Deadliner interface {
	SetReadDeadline(time.Time) error
}

// Awaited lets a receiver that sleeps between messages spin for the one
// answer its owner waits for.
//
// A receiver that spins after every message takes a CPU that others (fio,
// FUSE) need, so through a mount it sleeps in the poller between
// messages. But when the owner has sent a command and can do nothing
// until its answer comes (queue depth 1), that sleep and its wake-up are
// most of the round trip. Await says so: a receiver not yet asleep spins
// (Wait's poll) instead of sleeping; one already asleep is woken by a
// read deadline in the past, the poller's only way to wake one
// goroutine, and then spins. The owner's own read deadline (Go's
// SetReadDeadline, for a close or a linger) always wins over this kick:
// set it with SetReadDeadline here, and a kick neither moves nor clears
// it.
//
// One goroutine receives (Wait, Retry); Await and SetReadDeadline may
// come from any. The zero value is ready: every method takes the
// connection whose deadline it moves, always the same one.
type Awaited struct {
	// awaited: an answer is awaited (Await). parked: the receiver is
	// about to wait, or waits, in the poller. kicked: Await moved the read
	// deadline into the past to wake it.
	awaited, parked, kicked atomic.Bool
	// mu orders every change of the read deadline; owner: the owner's
	// deadline is set.
	mu    sync.Mutex
	owner bool
}

// aLongTimeAgo is a read deadline that has passed: it wakes the receiver.
var aLongTimeAgo = time.Unix(1, 0)

// Await says that the owner will wait for the answer to what it writes
// next, with nothing else to do meanwhile. Call it before the write: a
// quick answer could otherwise come before it is awaited, and the
// receiver would spin for the message after it.
func (a *Awaited) Await(c Deadliner) {
	a.awaited.Store(true)
	if !a.parked.Load() || a.kicked.Load() {
		return
	}
	a.mu.Lock()
	if !a.owner && !a.kicked.Load() {
		a.kicked.Store(true)
		c.SetReadDeadline(aLongTimeAgo)
	}
	a.mu.Unlock()
}

// Parked reports whether the receiver waits, or is about to wait, in the
// poller.
func (a *Awaited) Parked() bool { return a.parked.Load() }

// Wait is the receiver's wait for the next message. poll spins for it
// (without blocking: true when octets, the end or an error arrived; its
// error ends the wait); block waits for it in the poller, and fails
// with the read deadline's timeout when kicked. Wait polls instead of
// blocking when an answer is awaited, whether before it blocks or while
// it does (Await's kick). It reports whether the message came by poll
// (else block's read took it), and whether the spin caught the awaited
// answer: by poll, or by a block that a kick woke to find it there.
func (a *Awaited) Wait(c Deadliner, poll func() (bool, error), block func() error) (polled, caught bool, err error) {
	for {
		// parked before awaited is looked at: either this sees the
		// awaited answer, or Await sees this parked and kicks.
		a.parked.Store(true)
		if a.awaited.Swap(false) {
			a.parked.Store(false)
			if got, err := poll(); err != nil || got {
				return got, got, err
			}
			a.parked.Store(true)
		}
		err := block()
		a.parked.Store(false)
		kicked, owner := a.unkick(c)
		if err == nil {
			// Woken for the answer, it found it at once.
			return false, kicked && a.awaited.Swap(false), nil
		}
		switch {
		case !kicked:
			return false, false, err
		case owner:
			continue // the owner's deadline now stands: wait under it
		case !a.awaited.Swap(false):
			// A kick for an answer already spun for (Wait saw it
			// awaited before it blocked): wait for the next message.
			continue
		}
		if got, err := poll(); err != nil || got {
			return got, got, err
		}
	}
}

// Retry, after a read of the receiver failed, reports whether a kick's
// deadline failed it, and takes the kick back: the read is then to be
// made again. Await may kick a receiver just as it stops waiting, and the
// deadline then fails its next read, whatever that is.
func (a *Awaited) Retry(c Deadliner) bool {
	kicked, _ := a.unkick(c)
	return kicked
}

// unkick takes back a pending kick, clearing the read deadline unless the
// owner has set one of its own meanwhile (owner), which then stands.
func (a *Awaited) unkick(c Deadliner) (kicked, owner bool) {
	if !a.kicked.Load() {
		return false, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.kicked.Swap(false) {
		return false, false
	}
	if !a.owner {
		c.SetReadDeadline(time.Time{})
	}
	return true, a.owner
}

// SetReadDeadline sets the owner's read deadline on c (the zero time
// clears it), which a kick never undoes.
func (a *Awaited) SetReadDeadline(c Deadliner, t time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.owner = !t.IsZero()
	return c.SetReadDeadline(t)
}
