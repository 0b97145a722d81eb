package lunfs

import "sync"

// readTurn decides which worker reads /dev/fuse next: the one that has
// been idle the shortest time.
//
// Each worker reads requests into a slot of its own, and the data of a
// READ or WRITE pass through it twice (the socket's copy and FUSE's). The
// descriptor's read lock queues waiting readers first come, first
// served, so a mount with 127 workers sent each request to the slot used
// longest ago: at 64 KiB QD8 a working set of 8 MiB, out of the caches,
// against the ten or so slots that the I/Os in flight need. With the
// most recently idle worker reading next, the same few slots take every
// request, still warm from the last one: 1.06-1.42x the IOPS of the first
// come, first served order at 64 KiB randread QD8 through the mount
// (as much as a mount with ten workers did; docs/performance.md).
type readTurn struct {
	mu      sync.Mutex
	reading bool            // a worker has the turn
	idle    []chan struct{} // workers waiting for it, the most recent last
}

// newReadTurn is a turn for up to n workers.
func newReadTurn(n int) *readTurn {
	return &readTurn{idle: make([]chan struct{}, 0, n)}
}

// take waits for the worker's turn to read; me is the worker's own
// channel (one buffered slot).
func (t *readTurn) take(me chan struct{}) {
	t.mu.Lock()
	if !t.reading {
		t.reading = true
		t.mu.Unlock()
		return
	}
	t.idle = append(t.idle, me)
	t.mu.Unlock()
	<-me
}

// pass ends the turn of the worker that has it: the worker waiting the
// shortest time takes it.
func (t *readTurn) pass() {
	t.mu.Lock()
	n := len(t.idle)
	if n == 0 {
		t.reading = false
		t.mu.Unlock()
		return
	}
	next := t.idle[n-1]
	t.idle = t.idle[:n-1]
	t.mu.Unlock()
	next <- struct{}{}
}
