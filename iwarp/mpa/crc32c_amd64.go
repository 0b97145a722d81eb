package mpa

import "golang.org/x/sys/cpu"

// haveFold: the CPU (and OS) support the AVX-512 VPCLMULQDQ folding path.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// fold returns the CRC32c of p (a multiple of 64 octets, at least 256)
// from the raw register reg: it folds p, with reg XORed into its first four
// octets, down to one 16-octet lane, whose CRC from a zero register (two
// CRC32 instructions) is the answer.
//
//go:noescape
func fold(reg uint32, p []byte) uint32
