package lu

import (
	"math/bits"
	"sync"
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
type rangeLock struct {
	stripe [lockStripes]paddedMutex
}

// paddedMutex keeps each stripe on its own cache line.
type paddedMutex struct {
	sync.Mutex
	_ [56]byte
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
