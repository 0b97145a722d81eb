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
	for _, n := range []int{508, 1024, 1448, 2048, 4096, 8948, 65536} {
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
				// Markers that point back to an FPDU start: the FPDUPTR
				// base wraps past 2^16 for long runs.
				ptr := uint16(r.Uint32())
				for i := range n {
					putMarker(src[i*MarkerInterval:], ptr+uint16(i*MarkerInterval))
				}
				src[r.IntN(n)*MarkerInterval] ^= 0x5a // Reserved: ignored
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
					got, bad := crcSqueeze(c, src, dst, ptr)
					if bad {
						t.Fatalf("%d intervals, offset %d, %s: good Markers reported bad", n, off, where)
					}
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
				// Any one FPDUPTR bit wrong is reported, but for the two
				// low ones (always zero: FPDUs are 4-octet aligned).
				for _, at := range []int{2, 3} {
					i := r.IntN(n)
					copy(src, orig)
					if at == 2 {
						src[i*MarkerInterval+at] ^= 1 << r.IntN(8)
					} else {
						src[i*MarkerInterval+at] ^= 4 << r.IntN(6)
					}
					if _, bad := crcSqueeze(0, src, dst, ptr); !bad {
						t.Fatalf("%d intervals, offset %d, %s: Marker %d octet %d corrupted, not reported", n, off, where, i, at)
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
			crcSqueeze(0, src, src, 0)
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
// exactly them, Markers counting up from any FPDUPTR (wrapping past 2^16),
// at any alignment.
func TestCRCSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const piece = MarkerInterval - MarkerSize
	for _, n := range []int{1, 2, 3, 7, 8, 64, 129, 130} {
		for _, off := range []int{0, 1, 4, 60, 63} {
			p := make([]byte, off+n*piece)[off:]
			for i := range p {
				p[i] = byte(r.Uint32())
			}
			ptr := uint16(r.Uint32())
			var want []byte
			for i := range n {
				var m [MarkerSize]byte
				putMarker(m[:], ptr+uint16(i*MarkerInterval))
				want = append(want, m[:]...)
				want = append(want, p[i*piece:(i+1)*piece]...)
			}
			dst := make([]byte, off+n*MarkerInterval+1)[off:]
			for _, c := range []uint32{0, 0xffffffff} {
				got := crcSpread(c, p, ptr, dst)
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
