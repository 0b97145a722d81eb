package cq

import (
	"context"
	"sync"
)

// waiter is a consumer waiting for a completion, in the Ring's FIFO list.
type waiter struct {
	c          chan struct{} // capacity 1: the wake-up
	solicited  bool          // wakes for solicited completions only
	linked     bool
	prev, next *waiter
}

// waiters recycles Wait's waiters and their channels.
var waiters = sync.Pool{New: func() any { return &waiter{c: make(chan struct{}, 1)} }}

// link appends w to the list; mu held.
func (r *Ring[T]) link(w *waiter) {
	w.linked, w.prev, w.next = true, r.tail, nil
	if r.tail == nil {
		r.head = w
	} else {
		r.tail.next = w
	}
	r.tail = w
	// Sequentially consistent before the waiter's own check: a producer
	// that hands a completion over after this store sees the waiter.
	r.nwait.Add(1)
}

// unlink removes w from the list; mu held.
func (r *Ring[T]) unlink(w *waiter) {
	if w.prev == nil {
		r.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		r.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.linked, w.prev, w.next = false, nil, nil
	r.nwait.Add(-1)
}

// ready reports whether a waiter of this kind need not sleep.
func (r *Ring[T]) ready(solicitedOnly bool) bool {
	if solicitedOnly {
		return r.solicitedQueued()
	}
	return !r.empty()
}

// wake wakes the first waiter whose condition holds.
func (r *Ring[T]) wake() {
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
}

func (r *Ring[T]) wakeLocked() {
	if r.head == nil || r.closed.Load() {
		return
	}
	queued, solicited := !r.empty(), r.solicitedQueued()
	for w := r.head; w != nil; w = w.next {
		if w.solicited && solicited || !w.solicited && queued {
			r.signal(w)
			return
		}
	}
}

// signal unlinks w and wakes it; mu held.
func (r *Ring[T]) signal(w *waiter) {
	r.unlink(w)
	select {
	case w.c <- struct{}{}:
	default: // a notification not yet received already says as much
	}
}

// Arm requests one notification on Notify, like ibv_req_notify_cq: for the
// next completion, or with solicitedOnly the next solicited one. Unlike
// verbs it is level-triggered: if such a completion is queued already, the
// notification is sent at once, so none is missed between an empty Poll and
// Arm. Arming again before the notification widens solicited-only to any
// completion. It returns ErrClosed once the ring is closed.
func (r *Ring[T]) Arm(solicitedOnly bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return ErrClosed
	}
	w := &r.armed
	if w.linked {
		w.solicited = w.solicited && solicitedOnly
	} else {
		w.solicited = solicitedOnly
		r.link(w)
	}
	if r.ready(w.solicited) { // after linking: see link
		r.signal(w)
	}
	return nil
}

// Disarm withdraws an Arm whose notification has not been sent: a consumer
// that polls the ring itself for a while takes no notification for what
// it polls, and arms again when it stops. A notification already sent
// stays on Notify's channel.
func (r *Ring[T]) Disarm() {
	r.mu.Lock()
	if r.armed.linked {
		r.unlink(&r.armed)
	}
	r.mu.Unlock()
}

// Notify returns the channel that armed notifications arrive on (one value
// per notification). Close closes it.
func (r *Ring[T]) Notify() <-chan struct{} { return r.armed.c }

// Wait blocks until a completion is queued (with solicitedOnly: a solicited
// completion), ctx is done or the ring is closed, and returns at once if one
// is queued already. Any number of consumers may wait; each Push wakes at
// most one, whose condition it meets. Another consumer may poll the
// completion first, so poll until empty and wait in a loop.
func (r *Ring[T]) Wait(ctx context.Context, solicitedOnly bool) error {
	if r.ready(solicitedOnly) {
		return nil
	}
	w := waiters.Get().(*waiter)
	w.solicited = solicitedOnly
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		waiters.Put(w)
		return ErrClosed
	}
	r.link(w)
	r.mu.Unlock()
	if r.ready(solicitedOnly) { // it came while we were linking
		r.cancel(w, false)
		return nil
	}
	select {
	case <-w.c: // the waker unlinked w
		waiters.Put(w)
		return nil
	case <-ctx.Done():
		r.cancel(w, true)
		return ctx.Err()
	case <-r.done:
		r.cancel(w, true)
		return ErrClosed
	}
}

// cancel unlinks a waiter that stops waiting. If a producer woke it already,
// it takes the wake-up back and, with pass, hands it to the next waiter, as
// the completion it announced is still there for someone.
func (r *Ring[T]) cancel(w *waiter, pass bool) {
	r.mu.Lock()
	if w.linked {
		r.unlink(w)
	} else {
		select {
		case <-w.c:
		default:
		}
		if pass {
			r.wakeLocked()
		}
	}
	r.mu.Unlock()
	waiters.Put(w)
}

// Close closes the ring: pushes and arming fail with ErrClosed, waiters
// return ErrClosed and Notify's channel is closed. Completions still queued
// can be polled. Closing twice does nothing.
func (r *Ring[T]) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil
	}
	r.closed.Store(true)
	close(r.done)
	if r.armed.linked {
		r.unlink(&r.armed)
	}
	close(r.armed.c)
	return nil
}
