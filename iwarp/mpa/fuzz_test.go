package mpa

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// fuzzDeframe checks a Deframer on arbitrary stream octets: it never panics,
// and reading staged octets in chunks of any size gives exactly what a mix
// of staged and direct reads gives (the ULPDUs and the error).
func fuzzDeframe(t *testing.T, markers bool, stream []byte, seqStart uint32, chunk uint16, crc bool) {
	c := int(chunk)%4096 + 1
	staged, err1 := deframeAll(NewDeframer(seqStart, markers, crc), stream, c)
	mixed, err2 := deframeMixed(rand.New(rand.NewPCG(uint64(chunk), 1)), NewDeframer(seqStart, markers, crc), stream)
	if (err1 == nil) != (err2 == nil) || (err1 != nil && CodeOf(err1) != CodeOf(err2)) {
		t.Fatalf("staged reads: %v; mixed reads: %v", err1, err2)
	}
	if err1 != nil && CodeOf(err1) != CodeCRC && CodeOf(err1) != CodeMarker {
		t.Fatalf("unexpected error %v", err1)
	}
	if !crc && !markers && err1 != nil {
		t.Fatalf("no CRC, no Markers, yet %v", err1)
	}
	if len(staged) != len(mixed) {
		t.Fatalf("staged reads delivered %d ULPDUs, mixed reads %d", len(staged), len(mixed))
	}
	for i := range staged {
		if !bytes.Equal(staged[i], mixed[i]) {
			t.Fatalf("ULPDU %d differs between staged and mixed reads", i)
		}
	}
	// With CRCs on, every delivered ULPDU re-frames to the same stream
	// octets (Markers' Reserved bits and the CRC-off case aside).
	if crc && err1 == nil && len(staged) > 0 && !markers {
		f := NewFramer(seqStart, markers, crc)
		var again []byte
		for _, u := range staged {
			iov, err := f.AppendFPDU(nil, nil, u)
			if err != nil {
				t.Fatal(err)
			}
			again = append(again, flatten(iov)...)
		}
		if !bytes.HasPrefix(stream, again) {
			t.Fatalf("delivered ULPDUs do not re-frame to the input stream")
		}
	}
}

func addDeframeSeeds(f *testing.F, markers bool) {
	stream, _, _ := rfcStream(f, 0)
	for _, s := range [][]byte{stream, unhex(f, figure5), unhex(f, figure6), {}, {0}, {0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0xff, 0xff, 1, 2}} {
		f.Add(s, uint32(0), uint16(7), true)
		f.Add(s, uint32(0), uint16(4095), false)
	}
	fr := NewFramer(0xfffffff0, markers, true)
	iov, _ := fr.AppendFPDU(nil, []byte("hdr"), bytes.Repeat([]byte("ddpstore"), 200))
	iov, _ = fr.AppendFPDU(iov, nil, nil)
	f.Add(flatten(iov), uint32(0xfffffff0), uint16(100), true)
}

// FuzzDeframe fuzzes the receive path without Markers.
func FuzzDeframe(f *testing.F) {
	addDeframeSeeds(f, false)
	f.Fuzz(func(t *testing.T, stream []byte, seqStart uint32, chunk uint16, crc bool) {
		fuzzDeframe(t, false, stream, seqStart, chunk, crc)
	})
}

// FuzzDeframeMarkers fuzzes the receive path with Markers.
func FuzzDeframeMarkers(f *testing.F) {
	addDeframeSeeds(f, true)
	f.Fuzz(func(t *testing.T, stream []byte, seqStart uint32, chunk uint16, crc bool) {
		fuzzDeframe(t, true, stream, seqStart, chunk, crc)
	})
}

// FuzzFrameRoundTrip frames ULPDUs cut from arbitrary octets and checks the
// Deframer returns them unchanged. mode's bits: 1 Markers, 2 CRC, 4 a
// staging Framer.
func FuzzFrameRoundTrip(f *testing.F) {
	f.Add([]byte("MPA ID Req Frame"), uint32(0), uint16(5), byte(3))
	f.Add(bytes.Repeat([]byte{0xa5}, 3000), uint32(0xfffffe00), uint16(507), byte(1))
	f.Add(bytes.Repeat([]byte{0x5a}, 3000), uint32(0xfffffe00), uint16(509), byte(7))
	f.Add(bytes.Repeat([]byte{0x3c}, 4000), uint32(0xfffffe40), uint16(2500), byte(15))
	f.Fuzz(func(t *testing.T, data []byte, seqStart uint32, cut uint16, mode byte) {
		markers, crc := mode&1 != 0, mode&2 != 0
		// Long inputs cut small make thousands of FPDUs: slow to run and
		// far slower to minimise, and no more telling than a few dozen.
		data = data[:min(len(data), 4<<10)]
		cut = max(cut, uint16(len(data)/16))
		fr := NewFramer(seqStart, markers, crc)
		if mode&4 != 0 {
			// mode&8: room to keep octets on cache lines, in a
			// misaligned buffer.
			fr.UseStaging(make([]byte, MaxFPDUStreamLen+int(mode>>3&1)*(2*stageAlign+1))[mode>>3&1:])
		}
		var stream []byte
		var want [][]byte
		for rest, i := data, 0; i == 0 || len(rest) > 0; i++ {
			n := min(len(rest), int(cut)+i%3)
			hdr := min(n, 18)
			fr.Reset()
			iov, err := fr.AppendFPDU(nil, rest[:hdr], rest[hdr:n])
			if err != nil {
				t.Fatal(err)
			}
			stream = append(stream, flatten(iov)...)
			want = append(want, rest[:n])
			rest = rest[n:]
			if n == 0 {
				break
			}
		}
		got, err := deframeAll(NewDeframer(seqStart, markers, crc), stream, int(cut)+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d ULPDUs back, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("ULPDU %d differs", i)
			}
		}
	})
}

func TestDeframerStopsAfterError(t *testing.T) {
	stream, _, _ := rfcStream(t, 0)
	stream[0x10] ^= 1 // inside figure 5's ULPDU
	d := NewDeframer(0, true, true)
	_, err := deframeAll(d, stream, 1000)
	if !errors.Is(err, ErrCRC) {
		t.Fatalf("got %v", err)
	}
	ev, _, n, err := d.Next(stream[0x34:])
	if ev != NeedMore || n != 0 || !errors.Is(err, ErrCRC) || !errors.Is(d.Err(), ErrCRC) {
		t.Fatalf("after error: %v %d %v", ev, n, err)
	}
	if err := d.CommitDirect(nil); !errors.Is(err, ErrCRC) {
		t.Fatalf("CommitDirect after error: %v", err)
	}
}

func TestDeframerEndOfStream(t *testing.T) {
	stream, _, _ := rfcStream(t, 0)
	tests := []struct {
		name   string
		cut    int
		inside bool
	}{
		{"before anything", 0, false},
		{"after the leading Marker", 4, true},
		{"inside figure 5's ULPDU", 0x20, true},
		{"right after figure 5", 0x34, false},
		{"inside a Marker", 0x202, true},
		{"after the whole stream", len(stream), false},
	}
	for _, tc := range tests {
		d := NewDeframer(0, true, true)
		if _, err := deframeAll(d, stream[:tc.cut], 100); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err := d.EndOfStream()
		if !errors.Is(err, ErrLLPLost) || CodeOf(err) != CodeLLPLost {
			t.Fatalf("%s: got %v", tc.name, err)
		}
		if got := strings.Contains(err.Error(), "inside"); got != tc.inside || d.AtBoundary() == tc.inside {
			t.Errorf("%s: %v (AtBoundary %v)", tc.name, err, d.AtBoundary())
		}
		if _, _, _, err2 := d.Next(stream); err2 != err {
			t.Errorf("%s: Next after EndOfStream returned %v", tc.name, err2)
		}
	}
}

func TestDeframingAllocatesNothing(t *testing.T) {
	for _, markers := range []bool{false, true} {
		for _, direct := range []bool{false, true} {
			// 64 FPDUs of a 4 KiB payload: the Markers fall at a different
			// place in each.
			f := NewFramer(0, markers, true)
			var stream []byte
			var ends []int
			for range 64 {
				iov, _ := f.AppendFPDU(nil, make([]byte, 14), make([]byte, 4096))
				stream = append(stream, flatten(iov)...)
				ends = append(ends, len(stream))
			}
			d := NewDeframer(0, markers, true)
			dst := make([]byte, 14+4096)
			plan := make([][]byte, 0, 64)
			next, start := 0, 0
			one := func() {
				raw := stream[start:ends[next]]
				start = ends[next]
				next++
				for len(raw) > 0 {
					if direct && d.Remaining() > 0 {
						buf := dst[:d.Remaining()]
						plan = d.PlanDirect(plan[:0], buf)
						for _, v := range plan {
							raw = raw[copy(v, raw):]
						}
						if err := d.CommitDirect(buf); err != nil {
							t.Fatal(err)
						}
						continue
					}
					ev, _, n, err := d.Next(raw[:min(len(raw), 32)])
					if err != nil {
						t.Fatal(err)
					}
					raw = raw[n:]
					_ = ev
				}
			}
			if a := testing.AllocsPerRun(60, one); a != 0 {
				t.Errorf("markers %v direct %v: %v allocations per FPDU", markers, direct, a)
			}
		}
	}
}
