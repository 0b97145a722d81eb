package iscsi

import "encoding/binary"

// LUN is the 8-octet SAM logical unit number of a BHS (section 11.2.1.5
// refers to [SAM2]), as a big-endian integer of its octets.
type LUN uint64

// Address methods of the first level of a SAM LUN (the two high bits of
// octet 0), from SAM-5 (from memory, not checked against the standard).
const (
	lunPeripheral = 0x00 // 00b: peripheral device addressing, bus in bits 5-0, LUN in octet 1
	lunFlat       = 0x40 // 01b: flat space addressing, 14-bit LUN
)

// MaxLUN is the highest number a single-level LUN can carry (flat space).
const MaxLUN = 1<<14 - 1

// MakeLUN encodes n as a single-level LUN as Linux (int_to_scsilun) and
// most targets do: peripheral device addressing (0x00nn, bus 0) below 256,
// flat space addressing (0x40nn) from 256 to MaxLUN; the other six octets
// are zero. Errors: ErrLUNRange.
func MakeLUN(n uint16) (LUN, error) {
	switch {
	case n < 256:
		return LUN(uint64(n) << 48), nil
	case n <= MaxLUN:
		return LUN(uint64(lunFlat<<8|n) << 48), nil
	}
	return 0, ErrLUNRange
}

// Number decodes a single-level LUN: peripheral device addressing with bus
// 0 or flat space addressing, octets 2-7 zero. Any other form (more
// levels, other address methods, a bus number) is ErrLUNFormat.
func (l LUN) Number() (uint16, error) {
	if uint64(l)<<16 != 0 {
		return 0, ErrLUNFormat
	}
	hi := uint16(l >> 48)
	switch hi >> 8 & 0xc0 {
	case lunPeripheral:
		if hi>>8 != 0 {
			return 0, ErrLUNFormat // bus number
		}
		return hi & 0xff, nil
	case lunFlat:
		return hi & MaxLUN, nil
	}
	return 0, ErrLUNFormat
}

// Put writes the LUN into b[:8].
func (l LUN) Put(b []byte) { binary.BigEndian.PutUint64(b, uint64(l)) }
