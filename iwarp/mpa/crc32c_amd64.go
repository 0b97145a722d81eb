package mpa

import "golang.org/x/sys/cpu"

// haveFold: the CPU (and OS) support the AVX-512 VPCLMULQDQ folding path.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// fold returns the CRC32c of p (at least 256 octets) from the raw register
// reg: it folds the 64-octet blocks of p, with reg XORed into its first four
// octets, down to one 16-octet lane, takes that lane's CRC from a zero
// register (two CRC32 instructions), and runs the CRC32 instruction over
// the tail.
//
//go:noescape
func fold(reg uint32, p []byte) uint32
