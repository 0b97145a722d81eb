#include "textflag.h"

// Folding constants for CRC32c in the bit-reflected domain. Folding a
// 16-octet lane X = A (first 8 octets) | B (last 8) forward by D bits is
//   X' = clmul(A, reflect64(x^(D+63) mod P)) ^ clmul(B, reflect64(x^(D-1) mod P))
// (the extra x^-1 undoes the one-bit shift of a reflected carry-less
// product). Each constant is stored as its 64-bit reflected value.

// D = 2048 (a lane to the same lane of the next 256-octet block).
DATA k2048<>+0(SB)/8, $0xe9a5d8be00000000
DATA k2048<>+8(SB)/8, $0x1426a81500000000
GLOBL k2048<>(SB), RODATA, $16

// D = 512 (one 64-octet block to the next).
DATA k512<>+0(SB)/8, $0x1c19243b00000000
DATA k512<>+8(SB)/8, $0x75bba45b00000000
GLOBL k512<>(SB), RODATA, $16

// The four lanes of the last 64-octet block onto its last lane: lane 0 by
// 384 bits, lane 1 by 256, lane 2 by 128, lane 3 stays (zero constants).
DATA klanes<>+0(SB)/8, $0xa46ef4aa00000000
DATA klanes<>+8(SB)/8, $0x6051243f00000000
DATA klanes<>+16(SB)/8, $0x33ccbbbc00000000
DATA klanes<>+24(SB)/8, $0xa2158b3400000000
DATA klanes<>+32(SB)/8, $0x3743f7bd00000000
DATA klanes<>+40(SB)/8, $0x3171d43000000000
DATA klanes<>+48(SB)/8, $0
DATA klanes<>+56(SB)/8, $0
GLOBL klanes<>(SB), RODATA, $64

// func fold(reg uint32, p []byte) uint32
TEXT ·fold(SB), NOSPLIT, $0-36
	MOVL reg+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD AX, X4
	VPXORQ Z4, Z0, Z0
	ADDQ $256, SI
	SUBQ $256, CX

	VBROADCASTI32X4 k2048<>(SB), Z8

loop256:
	CMPQ CX, $256
	JB reduce
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPTERNLOGD $0x96, 0(SI), Z4, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPTERNLOGD $0x96, 64(SI), Z5, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPTERNLOGD $0x96, 128(SI), Z6, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, 192(SI), Z7, Z3
	ADDQ $256, SI
	SUBQ $256, CX
	JMP loop256

reduce:
	// Fold the four blocks into the last: Z1 ^= fold(Z0), Z2 ^= fold(Z1),
	// Z3 ^= fold(Z2), each by 512 bits.
	VBROADCASTI32X4 k512<>(SB), Z8
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPTERNLOGD $0x96, Z4, Z0, Z1
	VPCLMULQDQ $0x00, Z8, Z1, Z4
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z1, Z2
	VPCLMULQDQ $0x00, Z8, Z2, Z4
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPTERNLOGD $0x96, Z4, Z2, Z3

loop64:
	CMPQ CX, $64
	JB lanes
	VPCLMULQDQ $0x00, Z8, Z3, Z4
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, 0(SI), Z4, Z3
	ADDQ $64, SI
	SUBQ $64, CX
	JMP loop64

lanes:
	VMOVDQU64 klanes<>(SB), Z8
	VPCLMULQDQ $0x00, Z8, Z3, Z4
	VPCLMULQDQ $0x11, Z8, Z3, Z5
	VPXORQ Z5, Z4, Z4           // lanes 0-2 folded onto lane 3's place; lane 3 zero
	VEXTRACTI64X4 $1, Z4, Y5
	VPXORQ Y5, Y4, Y4           // lane 0^2, lane 1^3
	VEXTRACTI128 $1, Y4, X5
	VPXOR X5, X4, X4            // lane 0^1^2
	VEXTRACTI32X4 $3, Z3, X5
	VPXOR X5, X4, X4            // ^ lane 3
	// The CRC of the lane from a zero register is the CRC of everything
	// folded from reg: two CRC32 instructions. The tail (under 64 octets)
	// follows with CRC32 eight octets, then one octet, at a time.
	VMOVQ X4, AX
	VPEXTRQ $1, X4, BX
	VZEROUPPER
	XORL DX, DX
	CRC32Q AX, DX
	CRC32Q BX, DX

tail8:
	CMPQ CX, $8
	JB tail1
	CRC32Q (SI), DX
	ADDQ $8, SI
	SUBQ $8, CX
	JMP tail8

tail1:
	TESTQ CX, CX
	JZ done
	CRC32B (SI), DX
	INCQ SI
	DECQ CX
	JMP tail1

done:
	NOTL DX
	MOVL DX, ret+32(FP)
	RET

// Fold one 64-octet block in register B into accumulator A (by 2048 bits,
// constant in Z8): A = clmul(A.lo, k) ^ clmul(A.hi, k) ^ B.
#define FOLDREG(A, B) \
	VPCLMULQDQ $0x00, Z8, A, Z4 \
	VPCLMULQDQ $0x11, Z8, A, A \
	VPTERNLOGD $0x96, B, Z4, A

// Fold four blocks into the four accumulators Z0-Z3.
#define FOLD4(A, B, C, D) \
	FOLDREG(Z0, A) \
	FOLDREG(Z1, B) \
	FOLDREG(Z2, C) \
	FOLDREG(Z3, D)

// Zero the accumulators Z0-Z3 (folding into zero leaves the block as it
// is) and put the raw register from AX into Z5 for FIRST.
#define ZERO4 \
	VPXORQ Z0, Z0, Z0 \
	VPXORQ Z1, Z1, Z1 \
	VPXORQ Z2, Z2, Z2 \
	VPXORQ Z3, Z3, Z3 \
	VMOVD AX, X5

// After the first FOLD4 (which left the first block as it was in Z0), XOR
// the raw register into its first four octets; after later ones, nothing.
#define FIRST \
	VPXORQ Z5, Z0, Z0 \
	VPXORQ Z5, Z5, Z5

// Reduce the four accumulators Z0-Z3 to the CRC32c in DX, as fold does.
#define REDUCE \
	VBROADCASTI32X4 k512<>(SB), Z8 \
	VPCLMULQDQ $0x00, Z8, Z0, Z4 \
	VPCLMULQDQ $0x11, Z8, Z0, Z0 \
	VPTERNLOGD $0x96, Z4, Z0, Z1 \
	VPCLMULQDQ $0x00, Z8, Z1, Z4 \
	VPCLMULQDQ $0x11, Z8, Z1, Z1 \
	VPTERNLOGD $0x96, Z4, Z1, Z2 \
	VPCLMULQDQ $0x00, Z8, Z2, Z4 \
	VPCLMULQDQ $0x11, Z8, Z2, Z2 \
	VPTERNLOGD $0x96, Z4, Z2, Z3 \
	VMOVDQU64 klanes<>(SB), Z8 \
	VPCLMULQDQ $0x00, Z8, Z3, Z4 \
	VPCLMULQDQ $0x11, Z8, Z3, Z5 \
	VPXORQ Z5, Z4, Z4 \
	VEXTRACTI64X4 $1, Z4, Y5 \
	VPXORQ Y5, Y4, Y4 \
	VEXTRACTI128 $1, Y4, X5 \
	VPXOR X5, X4, X4 \
	VEXTRACTI32X4 $3, Z3, X5 \
	VPXOR X5, X4, X4 \
	VMOVQ X4, AX \
	VPEXTRQ $1, X4, BX \
	VZEROUPPER \
	XORL DX, DX \
	CRC32Q AX, DX \
	CRC32Q BX, DX \
	NOTL DX

// func foldSqueeze(reg uint32, src []byte, dst *byte, fpduptr uint16) (sum uint32, bad bool)
//
// The CRC32c, from the raw register reg, of src: n whole Marker intervals
// of 512 octets, each a 4-octet Marker then 508 octets (len(src) = 512n,
// n >= 1). As it goes it writes the 508n octets without the Markers to
// dst, which may be src itself or lie below it: interval i is loaded whole
// before its 508 octets are stored at dst+508i, below interval i+1. bad
// reports a Marker whose FPDUPTR is not fpduptr + 512i (mod 2^16, the low
// two bits ignored).
TEXT ·foldSqueeze(SB), NOSPLIT, $0-53
	MOVL reg+0(FP), AX
	MOVQ src_base+8(FP), SI
	MOVQ src_len+16(FP), CX
	MOVQ dst+32(FP), DI
	MOVWLZX fpduptr+40(FP), R8
	XORL R9, R9 // the FPDUPTRs that differed, ORed

	MOVL $0x7fff, BX
	KMOVW BX, K1 // dwords 0 to 14: the last 60 octets of an interval
	VPXORQ Z24, Z24, Z24
	VBROADCASTI32X4 k2048<>(SB), Z8

	ZERO4

interval:
	VMOVDQU64 0(SI), Z9
	VMOVDQU64 64(SI), Z10
	VMOVDQU64 128(SI), Z11
	VMOVDQU64 192(SI), Z12
	FOLD4(Z9, Z10, Z11, Z12)
	FIRST
	// The Marker's FPDUPTR is its last two octets, big-endian, the low
	// two bits ignored (as Marker.FPDUPTR). Read before the stores below
	// may overwrite it.
	MOVWLZX 2(SI), R10
	ROLW $8, R10
	XORL R8, R10
	ANDL $0xfffc, R10
	ORL R10, R9
	ADDL $512, R8
	VMOVDQU64 256(SI), Z13
	VMOVDQU64 320(SI), Z14
	VMOVDQU64 384(SI), Z15
	VMOVDQU64 448(SI), Z16
	FOLD4(Z13, Z14, Z15, Z16)
	// Each output block is two loaded blocks shifted down one dword.
	VALIGND $1, Z9, Z10, Z17
	VALIGND $1, Z10, Z11, Z18
	VALIGND $1, Z11, Z12, Z19
	VALIGND $1, Z12, Z13, Z20
	VALIGND $1, Z13, Z14, Z21
	VALIGND $1, Z14, Z15, Z22
	VALIGND $1, Z15, Z16, Z23
	VALIGND $1, Z16, Z24, Z25
	VMOVDQU64 Z17, 0(DI)
	VMOVDQU64 Z18, 64(DI)
	VMOVDQU64 Z19, 128(DI)
	VMOVDQU64 Z20, 192(DI)
	VMOVDQU64 Z21, 256(DI)
	VMOVDQU64 Z22, 320(DI)
	VMOVDQU64 Z23, 384(DI)
	VMOVDQU32 Z25, K1, 448(DI)
	ADDQ $512, SI
	ADDQ $508, DI
	SUBQ $512, CX
	JNZ interval

	REDUCE
	MOVL DX, sum+48(FP)
	TESTL R9, R9
	SETNE bad+52(FP)
	RET

// func foldSpread(reg uint32, p []byte, fpduptr uint16, dst *byte) uint32
//
// The CRC32c, from the raw register reg, of n whole Marker intervals, for
// each i a Marker with FPDUPTR fpduptr+512i then p[508i:508i+508]
// (len(p) = 508n, n >= 1), which it also writes to dst (512n octets): a
// sender stages payload with its Markers and sums it in one pass. The
// first block of an interval is its Marker and p's next 60 octets (a
// dword-masked load from 4 octets before them, then the Marker broadcast
// into dword 0).
TEXT ·foldSpread(SB), NOSPLIT, $0-52
	MOVL reg+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVWLZX fpduptr+32(FP), R8
	MOVQ dst+40(FP), DI

	MOVL $0xfffe, BX
	KMOVW BX, K1 // dwords 1 to 15: p's octets
	MOVL $1, BX
	KMOVW BX, K2 // dword 0: the Marker
	VBROADCASTI32X4 k2048<>(SB), Z8

	// The Marker's octets are 0, 0, then FPDUPTR big-endian: as a
	// little-endian dword, FPDUPTR byte-swapped in the high half.
#define MARKER \
	MOVL R8, R10 \
	ROLW $8, R10 \
	SHLL $16, R10 \
	ADDL $512, R8

	ZERO4

interval:
	MARKER
	VMOVDQU32.Z -4(SI), K1, Z9
	VPBROADCASTD R10, K2, Z9
	VMOVDQU64 60(SI), Z10
	VMOVDQU64 124(SI), Z11
	VMOVDQU64 188(SI), Z12
	FOLD4(Z9, Z10, Z11, Z12)
	FIRST
	VMOVDQU64 252(SI), Z13
	VMOVDQU64 316(SI), Z14
	VMOVDQU64 380(SI), Z15
	VMOVDQU64 444(SI), Z16
	FOLD4(Z13, Z14, Z15, Z16)
	VMOVDQU64 Z9, 0(DI)
	VMOVDQU64 Z10, 64(DI)
	VMOVDQU64 Z11, 128(DI)
	VMOVDQU64 Z12, 192(DI)
	VMOVDQU64 Z13, 256(DI)
	VMOVDQU64 Z14, 320(DI)
	VMOVDQU64 Z15, 384(DI)
	VMOVDQU64 Z16, 448(DI)
	ADDQ $508, SI
	ADDQ $512, DI
	SUBQ $508, CX
	JNZ interval

	REDUCE
	MOVL DX, ret+48(FP)
	RET

// Fold 256-bit register A (two lanes, constant in Y8) and add B:
// A = clmul(A.lo, k) ^ clmul(A.hi, k) ^ B, lane by lane.
#define FOLDY(A, B) \
	VPCLMULQDQ $0x00, Y8, A, Y9 \
	VPCLMULQDQ $0x11, Y8, A, A \
	VPXOR Y9, A, A \
	VPXOR B, A, A

// One 8-octet word at off of each of the three CRC32 streams (foldAVX2's
// fused loop).
#define CRC3(off) \
	CRC32Q off(R8), R12 \
	CRC32Q off(R10), R13 \
	CRC32Q off(R11), BX

// func foldAVX2(reg uint32, p, s []byte, crcs *[3]uint32) uint32
//
// fold for CPUs with VPCLMULQDQ but without AVX-512: the same constants
// and steps on 256-bit registers, two lanes each, eight of them for a
// 256-octet block. len(p) is a multiple of 64; the result is the raw
// register, not inverted (crcUpdate runs the tail and inverts).
//
// s, when not empty, is 240*m octets run by the CRC32 instruction in the
// same loop as the folds of p, which is then 256*(m+1) octets: three
// streams of 80*m octets (s's thirds), 80 octets of each per 256 folded,
// each from a zero register, their raw registers written to crcs. The
// CRC32 instruction and the carry-less multiplies issue on different
// units, so the two together sum more octets per cycle than either.
TEXT ·foldAVX2(SB), NOSPLIT, $0-68
	MOVL reg+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU 128(SI), Y4
	VMOVDQU 160(SI), Y5
	VMOVDQU 192(SI), Y6
	VMOVDQU 224(SI), Y7
	VMOVD AX, X9
	VPXOR Y9, Y0, Y0
	ADDQ $256, SI
	SUBQ $256, CX

	VBROADCASTI128 k2048<>(SB), Y8

	MOVQ s_base+32(FP), R8
	MOVQ s_len+40(FP), R9
	TESTQ R9, R9
	JZ loop256avx2
	MOVQ R9, AX
	XORL DX, DX
	MOVQ $3, BX
	DIVQ BX // AX: each stream's length
	LEAQ (R8)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	XORL R12, R12
	XORL R13, R13
	XORL BX, BX

loopfused:
	FOLDY(Y0, 0(SI))
	CRC3(0)
	CRC3(8)
	FOLDY(Y1, 32(SI))
	CRC3(16)
	FOLDY(Y2, 64(SI))
	CRC3(24)
	FOLDY(Y3, 96(SI))
	CRC3(32)
	FOLDY(Y4, 128(SI))
	CRC3(40)
	CRC3(48)
	FOLDY(Y5, 160(SI))
	CRC3(56)
	FOLDY(Y6, 192(SI))
	CRC3(64)
	FOLDY(Y7, 224(SI))
	CRC3(72)
	ADDQ $256, SI
	SUBQ $256, CX
	ADDQ $80, R8
	ADDQ $80, R10
	ADDQ $80, R11
	SUBQ $240, R9
	JNZ loopfused
	MOVQ crcs+56(FP), AX
	MOVL R12, 0(AX)
	MOVL R13, 4(AX)
	MOVL BX, 8(AX)

loop256avx2:
	CMPQ CX, $256
	JB reduceavx2
	FOLDY(Y0, 0(SI))
	FOLDY(Y1, 32(SI))
	FOLDY(Y2, 64(SI))
	FOLDY(Y3, 96(SI))
	FOLDY(Y4, 128(SI))
	FOLDY(Y5, 160(SI))
	FOLDY(Y6, 192(SI))
	FOLDY(Y7, 224(SI))
	ADDQ $256, SI
	SUBQ $256, CX
	JMP loop256avx2

reduceavx2:
	// Fold the four 64-octet blocks (Y0:Y1, Y2:Y3, Y4:Y5, Y6:Y7) into
	// the last, each by 512 bits.
	VBROADCASTI128 k512<>(SB), Y8
	FOLDY(Y0, Y2)
	FOLDY(Y1, Y3)
	FOLDY(Y0, Y4)
	FOLDY(Y1, Y5)
	FOLDY(Y0, Y6)
	FOLDY(Y1, Y7)
	VMOVDQU Y0, Y6
	VMOVDQU Y1, Y7

loop64avx2:
	CMPQ CX, $64
	JB lanesavx2
	FOLDY(Y6, 0(SI))
	FOLDY(Y7, 32(SI))
	ADDQ $64, SI
	SUBQ $64, CX
	JMP loop64avx2

lanesavx2:
	VMOVDQU klanes<>+0(SB), Y10
	VMOVDQU klanes<>+32(SB), Y11
	VPCLMULQDQ $0x00, Y10, Y6, Y12
	VPCLMULQDQ $0x11, Y10, Y6, Y13
	VPXOR Y13, Y12, Y12         // lanes 0 and 1 folded onto lane 3's place
	VPCLMULQDQ $0x00, Y11, Y7, Y13
	VPCLMULQDQ $0x11, Y11, Y7, Y14
	VPXOR Y14, Y13, Y13         // lane 2 folded; lane 3 zero
	VPXOR Y13, Y12, Y12
	VEXTRACTI128 $1, Y12, X13
	VPXOR X13, X12, X12         // lanes 0-2 folded
	VEXTRACTI128 $1, Y7, X13
	VPXOR X13, X12, X12         // ^ lane 3
	VMOVQ X12, AX
	VPEXTRQ $1, X12, BX
	VZEROUPPER
	XORL DX, DX
	CRC32Q AX, DX
	CRC32Q BX, DX
	MOVL DX, ret+64(FP)
	RET

// func cpuid7ecx() uint32: CPUID leaf 7's ECX (VPCLMULQDQ is bit 10),
// which x/sys/cpu reports only together with AVX-512.
TEXT ·cpuid7ecx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
