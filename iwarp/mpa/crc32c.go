package mpa

import (
	"hash/crc32"
	"unsafe"
)

// castagnoli is the CRC32c table; hash/crc32 uses the CPU's CRC32
// instruction when handed this exact table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// foldMin is the shortest buffer the carry-less-multiply path takes (its
// first load is 256 octets; from there on it beats the CRC32 instruction,
// 508-octet pieces between Markers included).
const foldMin = 256

// crcUpdate extends a running CRC32c (0 to start) over b: the same value as
// crc32.Update(sum, crc32.MakeTable(crc32.Castagnoli), b).
//
// On CPUs with AVX-512 and VPCLMULQDQ, the bulk of b is folded 256 octets
// at a time with carry-less multiplication (the folding method of Intel's
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"), more
// than twice as fast as the CRC32 instruction: MPA computes a CRC over every
// octet it sends and receives, so this is much of the cost of a transfer.
// Without AVX-512, a CPU with VPCLMULQDQ folds on 256-bit registers
// (foldAVX2). Shorter buffers go through hash/crc32.
func crcUpdate(sum uint32, b []byte) uint32 {
	if len(b) >= foldMin {
		switch {
		case haveFold:
			return fold(^sum, b)
		case haveFoldAVX2:
			return foldUpdateAVX2(sum, b)
		}
	}
	return crc32.Update(sum, castagnoli, b)
}

// foldUpdateAVX2 is crcUpdate by foldAVX2 (len(b) >= foldMin): the
// 64-octet blocks folded, the tail through hash/crc32.
func foldUpdateAVX2(sum uint32, b []byte) uint32 {
	n := len(b) &^ 63
	return crc32.Update(^foldAVX2(^sum, b[:n]), castagnoli, b[n:])
}

// crcSqueeze extends a running CRC32c over src, whole Marker intervals
// (len(src) a multiple of 512, each a Marker then 508 octets), and writes
// the intervals' octets without their Markers to dst (len(dst) >= 508 per
// interval). dst may be src itself, or overlap it from below. bad reports a
// Marker whose FPDUPTR (low two bits ignored, as Marker.FPDUPTR) is not
// fpduptr for the first interval, 512 more for each next one (mod 2^16).
func crcSqueeze(sum uint32, src, dst []byte, fpduptr uint16) (_ uint32, bad bool) {
	n := len(src) / MarkerInterval
	if n == 0 {
		return sum, false
	}
	_ = dst[n*(MarkerInterval-MarkerSize)-1]
	if haveFold {
		return foldSqueeze(^sum, src[:n*MarkerInterval], unsafe.SliceData(dst), fpduptr)
	}
	for i := range n {
		iv := src[i*MarkerInterval : (i+1)*MarkerInterval]
		if Marker(iv).FPDUPTR() != (fpduptr+uint16(i*MarkerInterval))&^3 {
			bad = true
		}
		sum = crc32.Update(sum, castagnoli, iv)
		copy(dst[i*(MarkerInterval-MarkerSize):], iv[MarkerSize:])
	}
	return sum, bad
}

// crcSpread writes whole Marker intervals to dst, for each i a Marker with
// FPDUPTR fpduptr+512i (mod 2^16) then p[508i:508i+508] (len(p) a multiple
// of 508, len(dst) at least 512 per interval), and extends a running
// CRC32c over them.
func crcSpread(sum uint32, p []byte, fpduptr uint16, dst []byte) uint32 {
	const piece = MarkerInterval - MarkerSize
	n := len(p) / piece
	if n == 0 {
		return sum
	}
	_ = dst[n*MarkerInterval-1]
	if haveFold {
		return foldSpread(^sum, p[:n*piece], fpduptr, unsafe.SliceData(dst))
	}
	for i := range n {
		iv := dst[i*MarkerInterval : (i+1)*MarkerInterval]
		putMarker(iv, fpduptr+uint16(i*MarkerInterval))
		copy(iv[MarkerSize:], p[i*piece:])
		sum = crc32.Update(sum, castagnoli, iv)
	}
	return sum
}

// CRC32C extends a running CRC32c (0 to start) over b with the fastest
// implementation this CPU has, the one MPA uses: for iSCSI's header and
// data digests (RFC 7143 sections 11.1 and 13.1), which are the same
// CRC32c.
func CRC32C(sum uint32, b []byte) uint32 { return crcUpdate(sum, b) }
