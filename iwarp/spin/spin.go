// Package spin sizes a receiver's busy poll between messages by how long
// its peer takes to answer.
//
// A receiver that polls a quiet socket for a while before it sleeps saves
// the sleep and the wake-up when the answer comes within the poll: on a
// virtual machine those cost a small I/O more than the network does. A
// fixed poll is either too short for a slow peer (the mount, whose FUSE
// round trip makes it answer in 70-90 µs where `ddpinitiator bench`
// answers in 20: the target polled 50 µs and then slept anyway, on almost
// every I/O) or wastes CPU on peers that answer late or not at all.
// Turnaround measures the time from this end's last write to the first
// octets of the peer's next message, and Spin polls for twice its
// smoothed value, within a bound; a peer slower than the bound gets the
// base.
package spin

import (
	"runtime"
	"sync/atomic"
	"time"
)

// epoch is where Now counts from.
var epoch = time.Now()

// Now is a monotonic clock in nanoseconds, cheap enough for every poll.
func Now() int64 { return int64(time.Since(epoch)) }

// MaxFactor bounds the spin at MaxFactor times the base: a peer whose
// answers take longer gets the base spin.
const MaxFactor = 4

// shift is the smoothing: each sample moves the estimate by 1/8 of its
// distance (the weight of RFC 6298's SRTT).
const shift = 3

// Turnaround is one connection's measure of its peer. The writer calls
// Wrote after each write; the one receiving goroutine calls Arrived and
// Spin.
type Turnaround struct {
	lastWrite atomic.Int64 // Now() at this end's last write, 0 before any

	// Receiver-only.
	sampled int64 // the lastWrite the last sample was taken against
	smooth  int64 // smoothed turnaround, ns; 0 until the first sample
	samples uint64
}

// Wrote records a write of this end: what arrives next answers it.
func (t *Turnaround) Wrote() { t.lastWrite.Store(Now()) }

// LastWrite is Now() at this end's last write, 0 before the first.
func (t *Turnaround) LastWrite() int64 { return t.lastWrite.Load() }

// Arrived records that a message began to arrive at now. It is a sample
// of the peer's turnaround when this end wrote since the last sample;
// messages that follow each other with no write between (a stream, a
// burst) say nothing of it. A sample is clamped at twice the bound, so
// one long idle gap moves the estimate only by so much.
func (t *Turnaround) Arrived(now int64, base time.Duration) {
	w := t.lastWrite.Load()
	if w == 0 || w == t.sampled {
		return
	}
	t.sampled = w
	d := now - w
	if d < 0 {
		d = 0
	}
	if c := 2 * MaxFactor * int64(base); d > c {
		d = c
	}
	t.samples++
	if t.samples == 1 {
		t.smooth = d
		return
	}
	t.smooth += (d - t.smooth) >> shift
}

// Spin is how long to poll for the next message: twice the smoothed
// turnaround, at least base and at most MaxFactor times base; base again
// when the turnaround itself is beyond that bound (such a peer is not
// worth the CPU). There is no cliff below the bound: a spin that falls
// short makes this end sleep, the wake-up adds to the next sample, and a
// spin that shrank for it would fall shorter still.
func (t *Turnaround) Spin(base time.Duration) time.Duration {
	s, hi := 2*time.Duration(t.smooth), MaxFactor*base
	switch {
	case base <= 0 || s <= base || time.Duration(t.smooth) > hi:
		return base
	case s > hi:
		return hi
	}
	return s
}

// Smoothed is the smoothed turnaround and the number of samples taken.
func (t *Turnaround) Smoothed() (time.Duration, uint64) {
	return time.Duration(t.smooth), t.samples
}

// Poll is the spin itself: it calls try, one non-blocking read that
// reports whether octets (or the end of the stream, or an error) arrived,
// until one does or the spin is over, yielding the processor between
// tries. The spin lasts t.Spin(base) from this end's last write or from
// the first try, whichever is later: what this end waits for is the
// peer's answer to what it sent, and the goroutines a yield lets run may
// take much of the spin before they send. It stops early when stop (may be
// nil) is set: a writer of this connection waits for the poller, which a
// spinning reader keeps from running. An arrival is a sample (Arrived).
// Poll returns try's error, or whether something arrived.
func (t *Turnaround) Poll(base time.Duration, try func() (bool, error), stop *atomic.Bool) (bool, error) {
	budget, first := int64(t.Spin(base)), int64(0)
	for {
		got, err := try()
		if err != nil {
			return false, err
		}
		now := Now()
		if got {
			t.Arrived(now, base)
			return true, nil
		}
		if stop != nil && stop.Load() {
			return false, nil
		}
		if first == 0 {
			first = now
		}
		if now-max(first, t.LastWrite()) >= budget {
			return false, nil
		}
		runtime.Gosched()
	}
}
