package mem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// Fast registration is the verbs' Fast-Register (RDMAC verbs "Fast-Register
// Physical MR", IB_WR_REG_MR): an MR is created once over the largest range
// it may ever describe, with no valid STag, and then, per use, its bounds
// (a window of that range), its access rights and its 8-bit key are set anew
// in one operation that allocates nothing. The STag index stays; the key
// changes at every FastRegister, so an STag of an earlier use fails
// (FaultInvalidSTag), as RFC 5040 requires of a reused STag with a stale
// key. A fast-registered STag is invalidated like any other (Table.Invalidate,
// Table.RemoteInvalidate) and must be invalid again before the next
// FastRegister.
//
// The region of a fast-register MR stays in its table entry for the MR's
// whole life; what changes is kept in atomics, guarded by a state word that
// carries the key, the access, a valid bit and a generation. A check reads
// the state word, then the window, publishes its hazard and reads the state
// word again: the window is written only while the STag is invalid, after
// every Reader that held the region has let go, so a check that sees the
// same valid state word twice has seen that registration's window.

// State word of a fast-register region.
const (
	frKeyMask   = 0xff
	frAccShift  = 8
	frAccMask   = 0xff << frAccShift
	frValid     = 1 << 16
	frBusy      = 1 << 17 // a FastRegister is setting the window
	frGenShift  = 32
	frGenOne    = 1 << frGenShift
	frFixedBits = frKeyMask | frAccMask | frValid | frBusy
)

// fastState is what a fast-register region adds to a region.
type fastState struct {
	state  atomic.Uint64
	winOff atomic.Uint64 // window: buf[winOff : winOff+winLen]
	winLen atomic.Uint64
	va     uint64 // address of buf[0] when VA-based, else 0 (zero-based)
	max    Access // the most access any registration may have
}

// ErrValid: FastRegister of an MR whose STag is still valid (invalidate it
// first), or of one being fast-registered by another goroutine.
var ErrValid = errors.New("STag still valid or being registered")

// ErrNotFast: a fast-register operation on an MR from Register.
var ErrNotFast = errors.New("not a fast-register memory region")

// RegisterFast creates a fast-register MR over bytes [off, off+length) of m
// under pd: every later FastRegister describes a window of this range with
// at most the access maxAcc. The MR starts with no valid STag (its index is
// allocated, its key not yet given out), and must be deregistered like any
// other.
func (t *Table) RegisterFast(pd PD, m *Mapping, off, length int, maxAcc Access, addr Addressing) (*MR, error) {
	if err := checkRegister(pd, m, maxAcc, addr); err != nil {
		return nil, err
	}
	buf, err := m.hold(off, length, maxAcc.writes())
	if err != nil {
		return nil, err
	}
	reg := &region{pd: pd, buf: buf, fast: &fastState{max: maxAcc}}
	if addr == VABased {
		reg.fast.va = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	idx, ok := t.allocIndex()
	if !ok {
		m.release()
		return nil, fmt.Errorf("mem: register: %d MRs: %w", t.live, ErrNoSTags)
	}
	c := t.dir[idx>>chunkBits].Load()
	reg.key = c.keys[idx&chunkMask] // the previous key: the first FastRegister draws another
	reg.fast.state.Store(uint64(reg.key))
	c.regs[idx&chunkMask].Store(reg)
	t.live++
	return &MR{t: t, m: m, reg: reg, stag: MakeSTag(idx, reg.key)}, nil
}

// FastRegister makes bytes [off, off+n) of the fast-register MR mr (offsets
// in the range it was created over) its region, with the access rights acc
// (a subset of the MR's maximum) and a fresh key, and returns the new STag;
// the window's first TO is mr.BaseTO(). mr's STag must be invalid (never
// registered, invalidated locally or remotely). It waits until no Reader
// holds the region from an earlier registration, so nothing placed under an
// old STag lands after it returns. It allocates nothing (but on error), and
// must not be called for one MR from two goroutines at once (the second
// fails with ErrValid) nor from inside a critical section that holds mr.
func (t *Table) FastRegister(mr *MR, off, n int, acc Access) (STag, error) {
	f := mr.reg.fast
	switch {
	case mr.t != t:
		return 0, fmt.Errorf("mem: fast register %v: %w", mr.stag, ErrForeign)
	case f == nil:
		return 0, fmt.Errorf("mem: fast register %v: %w", mr.stag, ErrNotFast)
	case !acc.valid() || acc&^f.max != 0:
		return 0, fmt.Errorf("mem: fast register %v with access %v (at most %v): %w", mr.stag, acc, f.max, ErrAccess)
	case off < 0 || n < 0 || off > len(mr.reg.buf)-n:
		return 0, fmt.Errorf("mem: fast register %d bytes at %d of a %d-byte MR: %w", n, off, len(mr.reg.buf), ErrRange)
	}
	w := f.state.Load()
	if w&(frValid|frBusy) != 0 || !f.state.CompareAndSwap(w, w|frBusy) {
		return 0, fmt.Errorf("mem: fast register %v: %w", mr.STag(), ErrValid)
	}
	// Readers that hold the region from the last registration finish
	// first; later ones see the busy state word and look again.
	regs := [1]*region{mr.reg}
	if err := t.quiesce(context.Background(), regs[:]); err != nil {
		f.state.Store(w)
		return 0, err
	}
	f.winOff.Store(uint64(off))
	f.winLen.Store(uint64(n))
	prev := uint8(w & frKeyMask)
	key := uint8(rand.Uint32N(255))
	if key >= prev {
		key++
	}
	gen := w&^frFixedBits + frGenOne
	f.state.Store(gen | frValid | uint64(acc)<<frAccShift | uint64(key))
	return MakeSTag(mr.stag.Index(), key), nil
}

// Quiesce waits until no Reader holds mr's region (as Deregister does, but
// the MR stays registered): after a local Invalidate, nothing that was
// placed under the STag is still being placed once it returns nil.
func (t *Table) Quiesce(ctx context.Context, mr *MR) error {
	if mr.t != t {
		return fmt.Errorf("mem: quiesce %v: %w", mr.stag, ErrForeign)
	}
	regs := [1]*region{mr.reg}
	return t.quiesce(ctx, regs[:])
}

// snapshot returns a registration's state word, or for a plain region one
// built from its immutable fields (generation 0, always valid).
func (reg *region) snapshot() uint64 {
	if reg.fast != nil {
		return reg.fast.state.Load()
	}
	return frValid | uint64(reg.access)<<frAccShift | uint64(reg.key)
}

// window returns the region's base TO and its bytes: the registration's
// whole range, or a fast-register MR's current window.
func (reg *region) window() (uint64, []byte) {
	f := reg.fast
	if f == nil {
		return reg.base, reg.buf
	}
	off, n := f.winOff.Load(), f.winLen.Load()
	if off > uint64(len(reg.buf)) || n > uint64(len(reg.buf))-off {
		return 0, nil // a torn read; the state word check rejects it
	}
	base := uint64(0)
	if f.va != 0 {
		base = f.va + off
	}
	return base, reg.buf[off : off+n : off+n]
}

// liveKey reports whether state word w is a valid registration with key k.
func liveKey(w uint64, k uint8) bool { return w&frValid != 0 && uint8(w&frKeyMask) == k }

func stateAccess(w uint64) Access { return Access(w & frAccMask >> frAccShift) }
