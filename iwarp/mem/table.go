package mem

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The STag index space is a fixed directory of lazily allocated chunks, so
// entries never move and readers find them with two atomic loads.
const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
	dirSize   = (MaxIndex + 1) >> chunkBits
)

// chunk holds the entries of chunkSize consecutive STag indexes.
type chunk struct {
	// regs is read by the data path: the live registration of each index,
	// or nil while the index is free, invalidated or deregistered.
	regs [chunkSize]atomic.Pointer[region]
	// keys is the last key given out at each index; guarded by Table.mu.
	keys [chunkSize]uint8
}

// region is one registration. It is immutable, so a reader that loaded it
// sees a consistent key, PD, rights and range.
type region struct {
	key    uint8
	access Access
	pd     PD
	base   uint64 // TO of buf[0]
	buf    []byte
	// fast is set for a fast-register MR (RegisterFast): its key, access,
	// validity and window then live there, in atomics, and key, access
	// and base above are unused.
	fast *fastState
}

// Table maps STags to memory regions; there is one per RNIC. Lookups are
// lock-free and allocate nothing; registration, invalidation and
// deregistration may run concurrently with them from any goroutine.
type Table struct {
	dir [dirSize]atomic.Pointer[chunk]

	readers atomic.Pointer[[]*Reader] // copy-on-write, under mu

	mu    sync.Mutex
	rng   *rand.Rand // ChaCha8 seeded from crypto/rand
	free  []uint32   // deregistered indexes, reused oldest first
	next  uint32     // lowest index never used
	limit uint32     // highest index to use
	live  int        // registered MRs (not yet deregistered)
}

// Addressing selects how the Tagged Offsets of a region are counted.
type Addressing uint8

// The ways to count a region's TOs.
const (
	// VABased: the TO of a byte is its virtual address, as libibverbs and
	// the Linux iSER initiator advertise.
	VABased Addressing = iota
	// ZeroBased: TO 0 is the first byte of the region.
	ZeroBased
)

// NewTable returns an empty table that hands out at most maxMRs STag indexes
// (MaxIndex when maxMRs is 0 or larger). Index 0 is never used, so STag 0 is
// never valid.
func NewTable(maxMRs int) *Table {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (crypto/rand panics rather)
	t := &Table{rng: rand.New(rand.NewChaCha8(seed)), next: 1, limit: MaxIndex}
	if maxMRs > 0 && maxMRs < MaxIndex {
		t.limit = uint32(maxMRs)
	}
	return t
}

// checkRegister validates the arguments common to Register and
// RegisterFast.
func checkRegister(pd PD, m *Mapping, acc Access, addr Addressing) error {
	switch {
	case pd.IsZero():
		return fmt.Errorf("mem: register: %w", ErrPD)
	case !acc.valid():
		return fmt.Errorf("mem: register with access %v: %w", acc, ErrAccess)
	case addr != VABased && addr != ZeroBased:
		return fmt.Errorf("mem: register with addressing %d: %w", addr, ErrAccess)
	case m == nil:
		return fmt.Errorf("mem: register: nil mapping: %w", ErrClosed)
	}
	return nil
}

// Register registers bytes [off, off+length) of m under pd with the access
// rights acc, its TOs counted as addr says, and returns the new MR with a
// fresh STag.
func (t *Table) Register(pd PD, m *Mapping, off, length int, acc Access, addr Addressing) (*MR, error) {
	if err := checkRegister(pd, m, acc, addr); err != nil {
		return nil, err
	}
	buf, err := m.hold(off, length, acc.writes())
	if err != nil {
		return nil, err
	}
	reg := &region{access: acc, pd: pd, buf: buf}
	if addr == VABased {
		reg.base = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	idx, ok := t.allocIndex()
	if !ok {
		m.release()
		return nil, fmt.Errorf("mem: register: %d MRs: %w", t.live, ErrNoSTags)
	}
	c := t.dir[idx>>chunkBits].Load()
	reg.key = t.newKey(c.keys[idx&chunkMask])
	c.keys[idx&chunkMask] = reg.key
	c.regs[idx&chunkMask].Store(reg)
	t.live++
	return &MR{t: t, m: m, reg: reg, stag: MakeSTag(idx, reg.key)}, nil
}

// allocIndex takes the oldest freed index, or else the next unused one,
// allocating its chunk on first use. Called with mu held.
func (t *Table) allocIndex() (uint32, bool) {
	if len(t.free) > 0 {
		idx := t.free[0]
		t.free = t.free[1:]
		return idx, true
	}
	if t.next > t.limit {
		return 0, false
	}
	idx := t.next
	t.next++
	if t.dir[idx>>chunkBits].Load() == nil {
		t.dir[idx>>chunkBits].Store(new(chunk))
	}
	return idx, true
}

// newKey draws a random key that differs from the index's previous one, so
// the STag of the registration just before always fails. Called with mu held.
func (t *Table) newKey(prev uint8) uint8 {
	k := uint8(t.rng.Uint32N(255))
	if k >= prev {
		k++
	}
	return k
}

// slot returns the entry of stag's index, or nil if its chunk does not exist.
func (t *Table) slot(stag STag) *atomic.Pointer[region] {
	idx := stag.Index()
	c := t.dir[idx>>chunkBits].Load()
	if c == nil {
		return nil
	}
	return &c.regs[idx&chunkMask]
}

// lookup returns the live registration that stag names and its state word
// (snapshot), or nil.
func (t *Table) lookup(stag STag) (*region, uint64) {
	s := t.slot(stag)
	if s == nil {
		return nil, 0
	}
	reg := s.Load()
	if reg == nil {
		return nil, 0
	}
	w := reg.snapshot()
	if !liveKey(w, stag.Key()) {
		return nil, 0
	}
	return reg, w
}

// Registered returns the number of MRs registered and not yet deregistered
// (invalidated ones included).
func (t *Table) Registered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}
