package iscsi

import (
	"encoding/binary"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// DigestLen is the length of a header or data digest (CRC32C).
const DigestLen = 4

// Digest is the CRC32C of the octets of b (RFC 7143 section 13.1, the
// polynomial 0x11edc6f41), computed by the same code as MPA's CRC. A
// digest spanning several pieces (a data segment and its padding) is
// DigestUpdate(DigestUpdate(0, a), b).
func Digest(b []byte) uint32 { return mpa.CRC32C(0, b) }

// DigestUpdate extends a running digest over b.
func DigestUpdate(sum uint32, b []byte) uint32 { return mpa.CRC32C(sum, b) }

// PutDigest writes the digest as it goes on the wire: the CRC's least
// significant octet first (RFC 3720 appendix B.4, whose examples RFC 7143
// keeps: the CRC of 32 zero octets, 0x8a9136aa, is sent aa 36 91 8a).
func PutDigest(b []byte, sum uint32) { binary.LittleEndian.PutUint32(b, sum) }

// GetDigest reads a digest from the wire.
func GetDigest(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
