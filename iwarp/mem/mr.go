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

// STag returns the region's STag.
func (mr *MR) STag() STag { return mr.stag }

// PD returns the region's Protection Domain.
func (mr *MR) PD() PD { return mr.reg.pd }

// Access returns the region's access rights.
func (mr *MR) Access() Access { return mr.reg.access }

// BaseTO returns the TO of the region's first byte: 0 for a zero-based
// region, its virtual address for a VA-based one.
func (mr *MR) BaseTO() uint64 { return mr.reg.base }

// Len returns the region's length in bytes.
func (mr *MR) Len() int { return len(mr.reg.buf) }

// Bytes returns the region's memory for local use by the application. It
// must not be used after the MR is deregistered and its Mapping closed.
func (mr *MR) Bytes() []byte { return mr.reg.buf }

// Mapping returns the mapping the region lies in.
func (mr *MR) Mapping() *Mapping { return mr.m }

// Valid reports whether the STag currently names this region: it has been
// neither invalidated nor deregistered.
func (mr *MR) Valid() bool {
	s := mr.t.slot(mr.stag)
	return s != nil && s.Load() == mr.reg
}
