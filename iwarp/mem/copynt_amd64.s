#include "textflag.h"

// func ntStore(dst, src *byte, n uintptr)
// n is a positive multiple of 64; dst is 16-octet aligned (MOVNTDQ faults
// otherwise). SSE2, which every amd64 processor has.
TEXT ·ntStore(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JZ   done

loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JNZ  loop
	SFENCE

done:
	RET
