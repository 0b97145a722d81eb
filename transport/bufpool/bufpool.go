// Package bufpool hands out contiguous runs of a registered memory region:
// the initiator's data buffers and the target's WRITE staging, which must each
// be one scatter/gather element (an RDMA Read has a single Data Sink).
package bufpool

import (
	"fmt"
	"math/bits"
	"sync"
)

// Pool allocates runs of whole units from a byte range [0, size). It knows
// nothing of the memory itself; callers add the offset to their region.
// It is safe for concurrent use.
type Pool struct {
	mu    sync.Mutex
	unit  int
	shift uint
	used  []uint64 // one bit per unit
	units int
	free  int
}

// New returns a pool of size octets in runs of unit octets; unit must be a
// power of two.
func New(size, unit int) (*Pool, error) {
	if unit <= 0 || unit&(unit-1) != 0 {
		return nil, fmt.Errorf("bufpool: unit %d is not a power of two", unit)
	}
	if size < unit {
		return nil, fmt.Errorf("bufpool: size %d smaller than one unit of %d", size, unit)
	}
	n := size / unit
	return &Pool{unit: unit, shift: uint(bits.TrailingZeros(uint(unit))), used: make([]uint64, (n+63)/64), units: n, free: n}, nil
}

// Size returns the octets the pool manages.
func (p *Pool) Size() int { return p.units << p.shift }

// Get returns the offset of a free run of at least n octets, or ok false
// when there is none now (or n exceeds the pool).
func (p *Pool) Get(n int) (off int, ok bool) {
	if n <= 0 {
		n = 1
	}
	k := (n + p.unit - 1) >> p.shift
	p.mu.Lock()
	defer p.mu.Unlock()
	if k > p.free {
		return 0, false
	}
	// First fit: the lowest run, which keeps big runs free at the top
	// (next fit fragmented a pool that small and large buffers share).
	// Whole used words are skipped at once.
	run := 0
	for i := 0; i < p.units; {
		if run == 0 && i&63 == 0 && p.used[i>>6] == ^uint64(0) {
			i += 64
			continue
		}
		if p.used[i>>6]&(1<<(i&63)) != 0 {
			run = 0
			i++
			continue
		}
		if run++; run == k {
			first := i - k + 1
			for j := first; j <= i; j++ {
				p.used[j>>6] |= 1 << (j & 63)
			}
			p.free -= k
			return first << p.shift, true
		}
		i++
	}
	return 0, false
}

// Put returns the run of n octets at off that Get handed out.
func (p *Pool) Put(off, n int) {
	if n <= 0 {
		n = 1
	}
	k := (n + p.unit - 1) >> p.shift
	first := off >> p.shift
	p.mu.Lock()
	defer p.mu.Unlock()
	for j := first; j < first+k && j < p.units; j++ {
		if p.used[j>>6]&(1<<(j&63)) == 0 {
			panic(fmt.Sprintf("bufpool: Put of a free unit %d (off %d, n %d)", j, off, n))
		}
		p.used[j>>6] &^= 1 << (j & 63)
	}
	p.free += k
}

// Free returns the number of free octets (not necessarily contiguous).
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free << p.shift
}
