package mem

import "fmt"

// STag is a Steering Tag: a 24-bit index into a Table in its high bits and
// an 8-bit key in its low bits, drawn afresh at each registration so that an
// STag left over from an earlier registration of the same index fails.
type STag uint32

// MaxIndex is the largest STag index.
const MaxIndex = 1<<(32-keyBits) - 1

const keyBits = 8 // the key's share of an STag

// MakeSTag returns the STag of index and key.
func MakeSTag(index uint32, key uint8) STag { return STag(index<<keyBits | uint32(key)) }

// Index returns the STag's index (its high 24 bits).
func (s STag) Index() uint32 { return uint32(s) >> keyBits }

// Key returns the STag's key (its low 8 bits).
func (s STag) Key() uint8 { return uint8(s) }

func (s STag) String() string { return fmt.Sprintf("STag %#08x", uint32(s)) }
