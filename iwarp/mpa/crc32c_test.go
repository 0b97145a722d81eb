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

// crcMarked agrees with hash/crc32 over the same intervals gathered into
// one buffer, for any number of intervals, starting value and alignment.
func TestCRCMarkedMatchesHashCRC32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const piece = MarkerInterval - MarkerSize
	for _, n := range []int{1, 2, 3, 7, 8, 64, 129, 130} {
		for _, off := range []int{0, 1, 4, 60, 63} {
			buf := make([]byte, off+n*piece)
			marks := make([]byte, off+n*MarkerSize)
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			for i := range marks {
				marks[i] = byte(r.Uint32())
			}
			p, m := buf[off:], marks[off:]
			var stream []byte
			for i := range n {
				stream = append(stream, m[i*MarkerSize:(i+1)*MarkerSize]...)
				stream = append(stream, p[i*piece:(i+1)*piece]...)
			}
			for _, c := range []uint32{0, 0xffffffff, r.Uint32()} {
				if got, want := crcMarked(c, p, m), crc32.Update(c, castagnoli, stream); got != want {
					t.Fatalf("%d intervals, offset %d, start %08x: %08x, want %08x", n, off, c, got, want)
				}
			}
		}
	}
}

func BenchmarkCRCMarked(b *testing.B) {
	const n = 128 // a 64 KiB ULPDU's intervals
	p, marks := make([]byte, n*(MarkerInterval-MarkerSize)), make([]byte, n*MarkerSize)
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(p) + len(marks)))
		for b.Loop() {
			crcMarked(0, p, marks)
		}
	})
	b.Run("per-piece", func(b *testing.B) {
		b.SetBytes(int64(len(p) + len(marks)))
		for b.Loop() {
			sum := uint32(0)
			for i := range n {
				sum = crcUpdate(sum, marks[i*MarkerSize:(i+1)*MarkerSize])
				sum = crcUpdate(sum, p[i*(MarkerInterval-MarkerSize):(i+1)*(MarkerInterval-MarkerSize)])
			}
		}
	})
}
