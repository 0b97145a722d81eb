package mem

// MR is a registered memory region: a byte range of a Mapping, its PD, its
// access rights and its STag.
type MR struct {
	t     *Table
	m     *Mapping
	reg   *region
	stag  STag
	state mrState // guarded by t.mu
}

// mrState is where an MR is in its deregistration.
type mrState uint8

const (
	registered   mrState = iota
	draining             // unreachable, waiting for a grace period
	deregistered         // index freed, mapping released
)

// STag returns the region's STag; for a fast-register MR the STag of its
// latest FastRegister (valid or not).
func (mr *MR) STag() STag {
	if f := mr.reg.fast; f != nil {
		return MakeSTag(mr.stag.Index(), uint8(f.state.Load()&frKeyMask))
	}
	return mr.stag
}

// PD returns the region's Protection Domain.
func (mr *MR) PD() PD { return mr.reg.pd }

// Access returns the region's access rights; for a fast-register MR those
// of its latest FastRegister.
func (mr *MR) Access() Access { return stateAccess(mr.reg.snapshot()) }

// BaseTO returns the TO of the region's first byte: 0 for a zero-based
// region, its virtual address for a VA-based one. For a fast-register MR
// it is the first byte of the latest FastRegister's window.
func (mr *MR) BaseTO() uint64 {
	base, _ := mr.reg.window()
	return base
}

// Len returns the region's length in bytes (a fast-register MR: its
// window's).
func (mr *MR) Len() int {
	_, b := mr.reg.window()
	return len(b)
}

// Bytes returns the region's memory for local use by the application (a
// fast-register MR: its window's). It must not be used after the MR is
// deregistered and its Mapping closed.
func (mr *MR) Bytes() []byte {
	_, b := mr.reg.window()
	return b
}

// Fast reports whether mr is a fast-register MR (RegisterFast).
func (mr *MR) Fast() bool { return mr.reg.fast != nil }

// Mapping returns the mapping the region lies in.
func (mr *MR) Mapping() *Mapping { return mr.m }

// Valid reports whether the STag currently names this region: it has been
// neither invalidated nor deregistered.
func (mr *MR) Valid() bool {
	s := mr.t.slot(mr.stag)
	return s != nil && s.Load() == mr.reg && mr.reg.snapshot()&frValid != 0
}
