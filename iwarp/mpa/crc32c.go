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
// 64-octet blocks folded, the tail through hash/crc32. From fusedMin on,
// pieces of b are split between the folds (the first 256*(m+1) octets)
// and three streams of the CRC32 instruction (80*m octets each, after
// them), run in one loop; the four raw registers are then joined, each
// shifted past the octets that follow it (fusedShift).
func foldUpdateAVX2(sum uint32, b []byte) uint32 {
	reg := ^sum
	for len(b) >= fusedMin {
		m := min((len(b)-256)/fusedBlock, fusedMaxM)
		v := 256 * (m + 1)
		n := v + 240*m
		var s [3]uint32
		r := foldAVX2(reg, b[:v], b[v:n], &s)
		k := &fusedShift[m]
		reg = multModP(k[2], r) ^ multModP(k[1], s[0]) ^ multModP(k[0], s[1]) ^ s[2]
		b = b[n:]
	}
	if len(b) >= foldMin {
		n := len(b) &^ 63
		reg = foldAVX2(reg, b[:n], nil, nil)
		b = b[n:]
	}
	return crc32.Update(^reg, castagnoli, b)
}

// The fused loop's geometry: per iteration 256 octets folded and 3*80 by
// the CRC32 instruction. Below fusedMin the three shifts that join the
// registers (about 50 ns each) cost more than the fused loop saves.
const (
	fusedBlock = 256 + 3*80
	fusedMin   = 16 << 10
	fusedMaxM  = (64<<10 - 256) / fusedBlock // one piece for an FPDU's 64 KiB
)

// fusedShift[m][j] is x^(8*80*m*(j+1)) mod P: it moves a raw register
// past j+1 of the fused loop's streams of m iterations.
var fusedShift = func() (t [fusedMaxM + 1][3]uint32) {
	x640 := xPow(8 * 80)
	t[0] = [3]uint32{xPow(0), xPow(0), xPow(0)}
	for m := 1; m <= fusedMaxM; m++ {
		t[m][0] = multModP(t[m-1][0], x640)
		t[m][1] = multModP(t[m][0], t[m][0])
		t[m][2] = multModP(t[m][1], t[m][0])
	}
	return t
}()

// castagnoliReflected is CRC32c's polynomial, bit-reflected, as the
// registers hold it (bit 31 is x^0).
const castagnoliReflected = 0x82f63b78

// multModP returns a*b mod P for a and b polynomials in the registers'
// bit-reflected form: multModP(x^(8n) mod P, r) is the register r after n
// zero octets (the CRC's linearity: the register of A followed by B is
// that of A shifted past B, XOR that of B from zero).
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow returns x^n mod P, reflected.
func xPow(n int) uint32 {
	r, sq := uint32(1)<<31, uint32(1)<<30 // x^0, x^1
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = multModP(r, sq)
		}
		sq = multModP(sq, sq)
	}
	return r
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
