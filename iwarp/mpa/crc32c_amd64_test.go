package mpa

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// The portable paths (hash/crc32 and copy) run where the CPU lacks
// AVX-512 VPCLMULQDQ; run the tests that cover them here too.
func TestWithoutFolding(t *testing.T) {
	if !haveFold {
		t.Skip("this CPU has no AVX-512 VPCLMULQDQ: every test already takes the portable paths")
	}
	haveFold = false
	defer func() { haveFold = true }()
	for name, test := range map[string]func(*testing.T){
		"CRCSqueeze":                TestCRCSqueeze,
		"CRCSpread":                 TestCRCSpread,
		"DirectReadAtEveryPhase":    TestDirectReadAtEveryPhase,
		"StagingMatchesReferencing": TestStagingMatchesReferencing,
		"RoundTrip":                 TestRoundTrip,
	} {
		t.Run(name, test)
	}
}

// foldAVX2 agrees with hash/crc32 wherever the CPU can run it, also on
// CPUs whose crcUpdate takes the AVX-512 path instead.
func TestFoldAVX2MatchesHashCRC32(t *testing.T) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasPCLMULQDQ || !cpu.X86.HasSSE42 || cpuid7ecx()&(1<<10) == 0 {
		t.Skip("this CPU has no VPCLMULQDQ on 256-bit registers")
	}
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 20000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for n := foldMin; n < len(buf)-16; n += 1 + r.IntN(97) {
		off := r.IntN(16)
		p := buf[off : off+n]
		c := r.Uint32()
		if got, want := foldUpdateAVX2(c, p), crc32.Update(c, castagnoli, p); got != want {
			t.Fatalf("len %d off %d start %08x: %08x, want %08x", n, off, c, got, want)
		}
	}
}
