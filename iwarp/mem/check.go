package mem

import "sync/atomic"

// Check validates an access of n bytes at Tagged Offset to through stag, by
// a stream of Protection Domain pd that needs the rights need, and returns
// the region's bytes [to, to+n) (length and capacity n). The checks run in
// the order: STag (index, key, validity), PD, access rights, TO wrap, base
// and bounds; the first that fails is the Fault. A zero-length access (n 0)
// still checks everything, its TO included (it may equal the end of the
// region); an engine that must not look at the TO of an empty message calls
// Table.CheckSTag instead, or nothing at all.
//
// Check must be called inside a critical section (Enter/Exit); the region is
// held and the slice may be used until Exit. It is lock-free and allocates
// nothing.
func (r *Reader) Check(stag STag, pd PD, to, n uint64, need Access) ([]byte, Fault) {
	b, _, f := r.CheckAccess(stag, pd, to, n, need)
	return b, f
}

// CheckAccess is Check that also returns the region's access (Verified
// among it), for a Data Sink that places differently into such a region.
func (r *Reader) CheckAccess(stag STag, pd PD, to, n uint64, need Access) ([]byte, Access, Fault) {
	if !r.active {
		panic(errInside)
	}
	idx := stag.Index()
	c := r.t.dir[idx>>chunkBits].Load()
	if c == nil {
		return nil, 0, FaultInvalidSTag
	}
	s := &c.regs[idx&chunkMask]
	for {
		reg := s.Load()
		if reg == nil {
			return nil, 0, FaultInvalidSTag
		}
		if reg.fast != nil {
			b, acc, f, again := r.checkFast(s, reg, stag, pd, to, n, need)
			if again {
				continue
			}
			return b, acc, f
		}
		if reg.key != stag.Key() {
			return nil, 0, FaultInvalidSTag
		}
		if f := admit(reg.pd, reg.access, pd, need); f != FaultNone {
			return nil, 0, f
		}
		end := to + n
		if end < to {
			return nil, 0, FaultTOWrap
		}
		if to < reg.base || end-reg.base > uint64(len(reg.buf)) {
			return nil, 0, FaultBaseBounds
		}
		if !r.hold(s, reg) {
			continue // the entry changed under us: look again
		}
		lo, hi := to-reg.base, end-reg.base
		return reg.buf[lo:hi:hi], reg.access, FaultNone
	}
}

// checkFast is Check of a fast-register region: the checks run on one state
// word and the window read after it; the hazard is published and the state
// word read again, and if it changed (an invalidation, a new registration)
// the whole check is done again (again true). A fault found on a window
// that changed meanwhile is not reported either: the next look finds the
// STag invalid or the new window.
func (r *Reader) checkFast(s *atomic.Pointer[region], reg *region, stag STag, pd PD, to, n uint64, need Access) (_ []byte, _ Access, _ Fault, again bool) {
	w := reg.fast.state.Load()
	if !liveKey(w, stag.Key()) {
		return nil, 0, FaultInvalidSTag, false
	}
	acc := stateAccess(w)
	if f := admit(reg.pd, acc, pd, need); f != FaultNone {
		return nil, 0, f, false
	}
	base, buf := reg.window()
	end := to + n
	var f Fault
	switch {
	case end < to:
		f = FaultTOWrap
	case to < base || end-base > uint64(len(buf)):
		f = FaultBaseBounds
	}
	if f != FaultNone {
		return nil, 0, f, reg.fast.state.Load() != w
	}
	held := r.n
	if !r.hold(s, reg) {
		return nil, 0, FaultNone, true
	}
	if reg.fast.state.Load() != w {
		if r.n > held { // release the slot just taken
			r.n--
			r.held[r.n].Store(nil)
		}
		return nil, 0, FaultNone, true
	}
	lo, hi := to-base, end-base
	return buf[lo:hi:hi], acc, FaultNone, false
}

// CheckSTag validates stag for a stream of pd that needs the rights need,
// without any TO or length: the STag, PD and access checks of Check. It is
// lock-free, allocates nothing and needs no critical section, since it hands
// out no memory.
func (t *Table) CheckSTag(stag STag, pd PD, need Access) Fault {
	reg, w := t.lookup(stag)
	if reg == nil {
		return FaultInvalidSTag
	}
	return admit(reg.pd, stateAccess(w), pd, need)
}

// admit runs the checks that do not depend on the TO, of a live
// registration of PD has with the access rights acc.
func admit(has PD, acc Access, pd PD, need Access) Fault {
	switch {
	case has != pd:
		return FaultNotAssociated
	case acc&need != need:
		return FaultAccess
	}
	return FaultNone
}
