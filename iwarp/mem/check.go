package mem

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
	if !r.active {
		panic(errInside)
	}
	idx := stag.Index()
	c := r.t.dir[idx>>chunkBits].Load()
	if c == nil {
		return nil, FaultInvalidSTag
	}
	s := &c.regs[idx&chunkMask]
	for {
		reg := s.Load()
		if reg == nil || reg.key != stag.Key() {
			return nil, FaultInvalidSTag
		}
		if f := reg.admit(pd, need); f != FaultNone {
			return nil, f
		}
		end := to + n
		if end < to {
			return nil, FaultTOWrap
		}
		if to < reg.base || end-reg.base > uint64(len(reg.buf)) {
			return nil, FaultBaseBounds
		}
		if !r.hold(s, reg) {
			continue // the entry changed under us: look again
		}
		lo, hi := to-reg.base, end-reg.base
		return reg.buf[lo:hi:hi], FaultNone
	}
}

// CheckSTag validates stag for a stream of pd that needs the rights need,
// without any TO or length: the STag, PD and access checks of Check. It is
// lock-free, allocates nothing and needs no critical section, since it hands
// out no memory.
func (t *Table) CheckSTag(stag STag, pd PD, need Access) Fault {
	return t.lookup(stag).admit(pd, need)
}

// admit runs the checks that do not depend on the TO; reg may be nil (an
// invalid STag).
func (reg *region) admit(pd PD, need Access) Fault {
	switch {
	case reg == nil:
		return FaultInvalidSTag
	case reg.pd != pd:
		return FaultNotAssociated
	case reg.access&need != need:
		return FaultAccess
	}
	return FaultNone
}
