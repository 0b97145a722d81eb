package mpa

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// crcUpdate agrees with hash/crc32 for every length around the fast path's
// boundaries, any starting value, and any alignment.
func TestCRCUpdateMatchesHashCRC32(t *testing.T) {
	if !haveFold {
		t.Log("no AVX-512 VPCLMULQDQ on this CPU: checking the fallback only")
	}
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lens := []int{0, 1, 63, 64, 255, 256, 257, 319, 320, 321, 508, 511, 512, 513, 1024, 4096, 4097, 65535, 65536 + 7}
	for n := 200; n < 1400; n++ {
		lens = append(lens, n)
	}
	for _, n := range lens {
		for _, off := range []int{0, 1, 3, 8, 13} {
			p := buf[off : off+n]
			for _, c := range []uint32{0, 0xffffffff, r.Uint32()} {
				if got, want := crcUpdate(c, p), crc32.Update(c, castagnoli, p); got != want {
					t.Fatalf("len %d off %d start %08x: %08x, want %08x", n, off, c, got, want)
				}
			}
		}
	}
	// Chaining pieces gives the CRC of the whole.
	sum := uint32(0)
	for p := buf; len(p) > 0; {
		k := min(len(p), 1+r.IntN(3000))
		sum = crcUpdate(sum, p[:k])
		p = p[k:]
	}
	if want := crc32.Checksum(buf, castagnoli); sum != want {
		t.Fatalf("chained %08x, want %08x", sum, want)
	}
}

func FuzzCRCUpdate(f *testing.F) {
	f.Add(make([]byte, 300), uint32(0))
	f.Add(make([]byte, 1000), uint32(0xdeadbeef))
	f.Fuzz(func(t *testing.T, p []byte, c uint32) {
		if got, want := crcUpdate(c, p), crc32.Update(c, castagnoli, p); got != want {
			t.Fatalf("len %d: %08x, want %08x", len(p), got, want)
		}
	})
}

func BenchmarkCRC32c(b *testing.B) {
	for _, n := range []int{508, 1024, 2048, 4096, 65536} {
		p := make([]byte, n)
		b.Run(fmt.Sprintf("fold/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crcUpdate(0, p)
			}
		})
		b.Run(fmt.Sprintf("hash-crc32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Update(0, castagnoli, p)
			}
		})
	}
}
