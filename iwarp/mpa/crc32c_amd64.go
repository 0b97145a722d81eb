package mpa

import "golang.org/x/sys/cpu"

// haveFold: the CPU (and OS) support the AVX-512 VPCLMULQDQ folding path.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// haveFoldAVX2: without AVX-512, the CPU has VPCLMULQDQ on 256-bit
// registers (CPUID leaf 7, ECX bit 10, with AVX2), for foldAVX2: the
// CRC32c of the plain (Markerless) path, 1.1-1.4x the CRC32 instruction's
// rate on this project's EPYC (more over data cold in memory).
var haveFoldAVX2 = !haveFold && cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42 && cpuid7ecx()&(1<<10) != 0

// foldAVX2 is fold on 256-bit registers, for len(p) a multiple of 64
// (at least 256), returning the raw register. With s not empty (240*m
// octets, len(p) then 256*(m+1)), it also runs the CRC32 instruction over
// s's three thirds from zero registers in the same loop, into crcs (see
// foldUpdateAVX2).
//
//go:noescape
func foldAVX2(reg uint32, p, s []byte, crcs *[3]uint32) uint32

func cpuid7ecx() uint32

// fold returns the CRC32c of p (at least 256 octets) from the raw register
// reg: it folds the 64-octet blocks of p, with reg XORed into its first four
// octets, down to one 16-octet lane, takes that lane's CRC from a zero
// register (two CRC32 instructions), and runs the CRC32 instruction over
// the tail.
//
//go:noescape
func fold(reg uint32, p []byte) uint32

// foldSqueeze returns the CRC32c, from the raw register reg, of src: n whole
// Marker intervals (len(src) = 512n, n >= 1), each a Marker and 508 octets.
// It also writes those 508n octets, Markers left out, to dst, which may be
// src itself or below it, and reports whether any Marker's FPDUPTR differs
// from fpduptr + 512i: a receiver checks the CRC and Markers of a ULPDU
// read into place and squeezes the Markers out in one pass.
//
//go:noescape
func foldSqueeze(reg uint32, src []byte, dst *byte, fpduptr uint16) (sum uint32, bad bool)

// foldSpread returns the CRC32c, from the raw register reg, of n whole
// Marker intervals, for each i a Marker with FPDUPTR fpduptr+512i (mod
// 2^16) then p[508i:508i+508] (len(p) = 508n, n >= 1), and writes them to
// dst (512n octets): a sender stages payload with its Markers and sums it
// in one pass.
//
//go:noescape
func foldSpread(reg uint32, p []byte, fpduptr uint16, dst *byte) uint32
