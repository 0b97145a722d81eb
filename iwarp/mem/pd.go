package mem

import (
	"strconv"
	"sync/atomic"
)

// PD is a Protection Domain: an identity that memory regions and the RDMAP
// Streams (QPs) allowed to reach them share. A region registered under one PD
// is never reachable through another. The zero PD is no domain.
type PD struct{ id uint64 }

// pdSeq numbers PDs process-wide, so PDs are unique across Tables (RNICs)
// too.
var pdSeq atomic.Uint64

// NewPD allocates a Protection Domain.
func NewPD() PD { return PD{pdSeq.Add(1)} }

// ID returns the PD's number, unique in the process (0 for the zero PD).
func (p PD) ID() uint64 { return p.id }

// IsZero reports whether p is the zero PD.
func (p PD) IsZero() bool { return p.id == 0 }

func (p PD) String() string { return "PD " + strconv.FormatUint(p.id, 10) }
