package lu

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The range lock divides a LU's blocks into regions of 1<<lockRegionShift
// blocks (1 MiB) and maps region r to stripe r mod lockStripes.
const (
	lockStripes     = 64 // bits in a stripe set
	lockRegionShift = 11
)

// rangeLock serializes the commands that change overlapping block ranges
// of a LU (WRITE, WRITE AND VERIFY, WRITE SAME, UNMAP, COMPARE AND WRITE),
// so that COMPARE AND WRITE's compare and write are atomic against every
// other change (SBC-3 5.3). It is a striped lock: a command locks the
// stripes of every region its range touches, in ascending stripe order, so
// that two commands never wait for each other in a cycle. Commands on
// distinct regions mostly run in parallel; two ranges 64 MiB apart share
// stripes and serialize needlessly, which costs only the time of a copy.
// READ takes no lock. Locking allocates nothing.
//
// A WRITE whose data the transport places straight into the store
// (Placement) holds no lock while its data arrive: that can take as long
// as the network does, and the connection that must deliver them may be
// the one that would wait. It counts itself in placing instead, on every
// stripe of its range, and starts only when it can take those stripes at
// once (tryPlace, which never waits). The commands that must be atomic
// against a WRITE (COMPARE AND WRITE) or that free blocks under it (UNMAP,
// WRITE SAME) take the lock with lockDrained: they first bar new
// placements of their stripes (drain), then wait, without the lock, for
// those in flight to end. Plain WRITEs and the copies of staged data need
// not wait for placements: two WRITEs to the same blocks in flight at once
// may land in either order (SAM-5 task attribute SIMPLE).
type rangeLock struct {
	stripe [lockStripes]paddedMutex
}

// paddedMutex keeps each stripe on its own cache line.
type paddedMutex struct {
	sync.Mutex
	placing atomic.Int32 // placements in flight on the stripe
	drain   atomic.Int32 // lockDrained callers waiting for them
	_       [48]byte
}

// stripes returns the set of stripes (bit i: stripe i) covering blocks
// [lba, lba+n), which the caller has checked lie inside the LU.
func stripes(lba, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	first, last := lba>>lockRegionShift, (lba+n-1)>>lockRegionShift
	if last-first >= lockStripes-1 {
		return ^uint64(0)
	}
	return bits.RotateLeft64(1<<(last-first+1)-1, int(first%lockStripes))
}

// lock locks the stripes of set in ascending order.
func (r *rangeLock) lock(set uint64) {
	for s := set; s != 0; s &= s - 1 {
		r.stripe[bits.TrailingZeros64(s)].Lock()
	}
}

// unlock unlocks the stripes of set.
func (r *rangeLock) unlock(set uint64) {
	for s := set; s != 0; s &= s - 1 {
		r.stripe[bits.TrailingZeros64(s)].Unlock()
	}
}

// tryPlace starts a placement on the stripes of set if none of them is
// locked or being drained, without waiting; unplace ends it.
func (r *rangeLock) tryPlace(set uint64) bool {
	taken := uint64(0)
	ok := true
	for s := set; s != 0; s &= s - 1 {
		st := &r.stripe[bits.TrailingZeros64(s)]
		if !st.TryLock() {
			ok = false
			break
		}
		taken |= s & -s
		if st.drain.Load() != 0 {
			ok = false
			break
		}
	}
	if ok {
		// Counted while the stripes are held: a lockDrained that takes
		// them next sees the count.
		for s := set; s != 0; s &= s - 1 {
			r.stripe[bits.TrailingZeros64(s)].placing.Add(1)
		}
	}
	r.unlock(taken)
	return ok
}

// unplace ends a placement that tryPlace started on set.
func (r *rangeLock) unplace(set uint64) {
	for s := set; s != 0; s &= s - 1 {
		r.stripe[bits.TrailingZeros64(s)].placing.Add(-1)
	}
}

// lockDrained locks the stripes of set once no placement is in flight on
// them. It bars new placements there first, so it does not wait behind a
// stream of them; it waits without holding the lock, so that the
// connections delivering the placements' data never wait for it. It must
// not run on a goroutine that ends placements (a connection's loop): the
// LU's Waits sends these commands off the loop.
func (r *rangeLock) lockDrained(set uint64) {
	for s := set; s != 0; s &= s - 1 {
		r.stripe[bits.TrailingZeros64(s)].drain.Add(1)
	}
	for pause := time.Microsecond * 20; ; pause = min(2*pause, time.Millisecond) {
		r.lock(set)
		if r.drained(set) {
			break
		}
		r.unlock(set)
		time.Sleep(pause)
	}
	// The lock now keeps new placements out.
	for s := set; s != 0; s &= s - 1 {
		r.stripe[bits.TrailingZeros64(s)].drain.Add(-1)
	}
}

// drained reports whether no placement is in flight on the stripes of set.
func (r *rangeLock) drained(set uint64) bool {
	for s := set; s != 0; s &= s - 1 {
		if r.stripe[bits.TrailingZeros64(s)].placing.Load() != 0 {
			return false
		}
	}
	return true
}
