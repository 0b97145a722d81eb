package mpa

import "hash/crc32"

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
// Shorter buffers go through hash/crc32.
func crcUpdate(sum uint32, b []byte) uint32 {
	if haveFold && len(b) >= foldMin {
		return fold(^sum, b)
	}
	return crc32.Update(sum, castagnoli, b)
}
