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
	checkFoldAVX2(t)
}

// TestFusedShift: the fused loop's join, multModP by x^(8n), is the
// register after n zero octets.
func TestFusedShift(t *testing.T) {
	zeros := make([]byte, 80*fusedMaxM*3)
	for _, m := range []int{1, 2, 17, fusedMaxM} {
		for j := range 3 {
			r := uint32(0x12345678 * (m + j + 1))
			n := 80 * m * (j + 1)
			want := ^crc32.Update(^r, castagnoli, zeros[:n])
			if got := multModP(fusedShift[m][j], r); got != want {
				t.Errorf("m %d, %d streams: %08x, want %08x", m, j+1, got, want)
			}
		}
	}
}

func checkFoldAVX2(t *testing.T) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasPCLMULQDQ || !cpu.X86.HasSSE42 || cpuid7ecx()&(1<<10) == 0 {
		t.Skip("this CPU has no VPCLMULQDQ on 256-bit registers")
	}
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 300000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	// Every length up to 20000 in small steps, the fused loop's from 16
	// KiB on (one piece per 64 KiB, each m, the tails) in larger ones.
	for n := foldMin; n < len(buf)-16; n += 1 + r.IntN(97) + max(0, n-20000)/40 {
		off := r.IntN(16)
		p := buf[off : off+n]
		c := r.Uint32()
		if got, want := foldUpdateAVX2(c, p), crc32.Update(c, castagnoli, p); got != want {
			t.Fatalf("len %d off %d start %08x: %08x, want %08x", n, off, c, got, want)
		}
	}
}
