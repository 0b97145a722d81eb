package mpa

import "encoding/binary"

// FPDU layout constants (RFC 5044 sections 4.1 and 4.2).
const (
	// LengthSize is the size of the ULPDU_Length field that leads every FPDU.
	LengthSize = 2
	// CRCSize is the size of the CRC field that ends every FPDU, present
	// even when CRCs are not in use.
	CRCSize = 4
	// Overhead is the minimum number of octets an FPDU adds to its ULPDU.
	Overhead = LengthSize + CRCSize
	// MarkerSize is the size of a Marker.
	MarkerSize = 4
	// MarkerInterval is the spacing of Markers in the TCP octet stream.
	MarkerInterval = 512
	// MaxULPDU is the largest ULPDU the 16-bit ULPDU_Length field can carry.
	MaxULPDU = 0xffff
)

// PadLen returns the number of PAD octets (0 to 3) that follow a ULPDU of
// ulen octets, so that the FPDU is a multiple of four octets (4.1).
func PadLen(ulen int) int { return (4 - (LengthSize+ulen)%4) % 4 }

// FPDULen returns the octets of an FPDU carrying ulen ULPDU octets, not
// counting Markers: ULPDU_Length, ULPDU, PAD and CRC.
func FPDULen(ulen int) int { return LengthSize + ulen + PadLen(ulen) + CRCSize }

// putCRC stores a CRC32c value in the FPDU's CRC field. RFC 5044 section
// 4.4's annotated FPDUs fix the octet order: CRC 0x83992352 is sent as
// 52 23 99 83.
func putCRC(b []byte, sum uint32) { binary.LittleEndian.PutUint32(b, sum) }

// getCRC reads the FPDU's CRC field.
func getCRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// Marker is the 4-octet MPA Marker (4.2): 16 reserved bits and the FPDUPTR.
type Marker []byte

// FPDUPTR returns the Marker's back-pointer to its FPDU's ULPDU_Length
// field, with the two low bits treated as zero as 4.2 requires.
func (m Marker) FPDUPTR() uint16 { return binary.BigEndian.Uint16(m[2:4]) &^ 3 }

// putMarker writes a Marker with the given FPDUPTR and zero Reserved bits.
func putMarker(b []byte, fpduptr uint16) {
	b[0], b[1] = 0, 0
	binary.BigEndian.PutUint16(b[2:4], fpduptr)
}
