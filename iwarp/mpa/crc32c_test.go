package mpa

import (
	"bytes"
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

// crcSqueeze agrees with hash/crc32 over the same octets and leaves exactly
// the octets between the Markers in dst, whether dst is src itself, lies
// below it overlapping, or apart; at any alignment.
func TestCRCSqueeze(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const piece = MarkerInterval - MarkerSize
	for _, n := range []int{1, 2, 3, 7, 8, 64, 129, 130} {
		for _, off := range []int{0, 1, 4, 60, 63} {
			for _, where := range []string{"in place", "below", "apart"} {
				buf := make([]byte, off+n*MarkerInterval+MarkerInterval)
				src := buf[off+MarkerSize : off+MarkerSize+n*MarkerInterval]
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				orig := bytes.Clone(src)
				var want []byte
				for i := range n {
					want = append(want, orig[i*MarkerInterval+MarkerSize:(i+1)*MarkerInterval]...)
				}
				var dst []byte
				switch where {
				case "in place":
					dst = src
				case "below":
					dst = buf[off : off+n*piece]
				case "apart":
					dst = make([]byte, n*piece+1)
				}
				guard := buf[off+MarkerSize+n*MarkerInterval:]
				guardWas := bytes.Clone(guard)
				for _, c := range []uint32{0, 0xffffffff} {
					if c != 0 {
						copy(src, orig)
					}
					got := crcSqueeze(c, src, dst)
					if wantCRC := crc32.Update(c, castagnoli, orig); got != wantCRC {
						t.Fatalf("%d intervals, offset %d, %s, start %08x: CRC %08x, want %08x", n, off, where, c, got, wantCRC)
					}
					if !bytes.Equal(dst[:n*piece], want) {
						t.Fatalf("%d intervals, offset %d, %s: squeezed octets differ", n, off, where)
					}
					if where == "apart" && dst[n*piece] != 0 || !bytes.Equal(guard, guardWas) {
						t.Fatalf("%d intervals, offset %d, %s: wrote past the end", n, off, where)
					}
				}
			}
		}
	}
}

func BenchmarkCRCSqueeze(b *testing.B) {
	src := make([]byte, 128*MarkerInterval) // a 64 KiB ULPDU's intervals
	b.Run("fused", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			crcSqueeze(0, src, src)
		}
	})
	b.Run("crc-then-copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			crcUpdate(0, src)
			for i := 0; i < len(src); i += MarkerInterval {
				copy(src[i/MarkerInterval*(MarkerInterval-MarkerSize):], src[i+MarkerSize:i+MarkerInterval])
			}
		}
	})
	b.Run("crc-only", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			crcUpdate(0, src)
		}
	})
}

// crcSpread agrees with hash/crc32 over the intervals it writes, and writes
// exactly them, at any alignment.
func TestCRCSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const piece = MarkerInterval - MarkerSize
	for _, n := range []int{1, 2, 3, 7, 8, 64, 129, 130} {
		for _, off := range []int{0, 1, 4, 60, 63} {
			p := make([]byte, off+n*piece)[off:]
			marks := make([]byte, off+n*MarkerSize)[off:]
			for i := range p {
				p[i] = byte(r.Uint32())
			}
			for i := range marks {
				marks[i] = byte(r.Uint32())
			}
			var want []byte
			for i := range n {
				want = append(want, marks[i*MarkerSize:(i+1)*MarkerSize]...)
				want = append(want, p[i*piece:(i+1)*piece]...)
			}
			dst := make([]byte, off+n*MarkerInterval+1)[off:]
			for _, c := range []uint32{0, 0xffffffff} {
				got := crcSpread(c, p, marks, dst)
				if wantCRC := crc32.Update(c, castagnoli, want); got != wantCRC {
					t.Fatalf("%d intervals, offset %d, start %08x: CRC %08x, want %08x", n, off, c, got, wantCRC)
				}
				if !bytes.Equal(dst[:n*MarkerInterval], want) || dst[n*MarkerInterval] != 0 {
					t.Fatalf("%d intervals, offset %d: staged octets differ", n, off)
				}
			}
		}
	}
}
