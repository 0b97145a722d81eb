package mpa

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestMULPDU(t *testing.T) {
	tests := []struct {
		emss    int
		markers bool
		want    int
	}{
		// Without Markers: EMSS - (6 + EMSS mod 4).
		{1460, false, 1454},
		{1448, false, 1442},
		{1461, false, 1454},
		{9000, false, 8994},
		{65483, false, 65474},
		// With Markers: EMSS - (6 + 4*ceil(EMSS/512) + EMSS mod 4).
		{1460, true, 1460 - (6 + 4*3 + 0)},
		{1448, true, 1448 - (6 + 4*3 + 0)},
		{1461, true, 1461 - (6 + 4*3 + 1)},
		{512, true, 512 - (6 + 4*1)},
		{513, true, 513 - (6 + 4*2 + 1)},
		{9000, true, 9000 - (6 + 4*18 + 0)},
		// Never below 128 (4.5), never beyond ULPDU_Length's range.
		{536, true, 536 - (6 + 4*2)},
		{134, false, 128},
		{100, false, 128},
		{100, true, 128},
		{0, false, 128},
		{1 << 20, false, MaxULPDU},
	}
	for _, tc := range tests {
		if got := MULPDU(tc.emss, tc.markers); got != tc.want {
			t.Errorf("MULPDU(%d, markers=%v) = %d, want %d", tc.emss, tc.markers, got, tc.want)
		}
	}
}

// A ULPDU of MULPDU octets always fits an EMSS-sized segment, wherever the
// Markers fall: the formula is the worst case.
func TestMULPDUFitsEMSS(t *testing.T) {
	for emss := 128 + 10; emss < 9100; emss += 7 {
		for _, markers := range []bool{false, true} {
			m := MULPDU(emss, markers)
			if m == MinMULPDU {
				continue // the floor may exceed a tiny EMSS; 4.5 allows it
			}
			for off := uint32(0); off < MarkerInterval; off += 4 {
				f := NewFramer(0, markers, true)
				f.pos = off
				if n := f.FPDUStreamLen(m); n > emss {
					t.Fatalf("emss %d markers %v at offset %d: FPDU of MULPDU %d takes %d octets", emss, markers, off, m, n)
				}
			}
		}
	}
}

func TestPadAndFPDULen(t *testing.T) {
	for ulen, want := range []int{2, 1, 0, 3, 2, 1, 0, 3} {
		if got := PadLen(ulen); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", ulen, got, want)
		}
		if n := FPDULen(ulen); n%4 != 0 || n != 6+ulen+want {
			t.Errorf("FPDULen(%d) = %d", ulen, n)
		}
	}
}

// FPDUStreamLen and MaxULPDUIn agree with what AppendFPDU really emits, for
// every Marker phase and length near Marker boundaries.
func TestFPDUStreamLenMatchesFraming(t *testing.T) {
	for _, markers := range []bool{false, true} {
		for off := uint32(0); off < MarkerInterval; off += 4 {
			for _, ulen := range []int{0, 1, 2, 3, 4, 5, 500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 1012, 1013, 1014, 1015, 1016, 4096, 65535} {
				f := NewFramer(0xfffff000, markers, true)
				f.pos += off
				want := f.FPDUStreamLen(ulen)
				start := f.Pos()
				iov, err := f.AppendFPDU(nil, nil, make([]byte, ulen))
				if err != nil {
					t.Fatal(err)
				}
				if got := int(f.Pos() - start); got != want || len(flatten(iov)) != want {
					t.Fatalf("markers %v offset %d ulen %d: framed %d (%d in iovecs), FPDUStreamLen says %d",
						markers, off, ulen, got, len(flatten(iov)), want)
				}
			}
			f := NewFramer(0, markers, true)
			f.pos = off
			for _, room := range []int{5, 8, 9, 100, 512, 1460, 9000, 70000} {
				u := f.MaxULPDUIn(room)
				if u == -1 {
					if f.FPDUStreamLen(0) <= room {
						t.Fatalf("MaxULPDUIn(%d) = -1 but an empty FPDU takes %d", room, f.FPDUStreamLen(0))
					}
					continue
				}
				if f.FPDUStreamLen(u) > room || (u < MaxULPDU && f.FPDUStreamLen(u+1) <= room) {
					t.Fatalf("markers %v offset %d: MaxULPDUIn(%d) = %d is not the largest fit", markers, off, room, u)
				}
			}
		}
	}
}

func TestFramerPayloadNotCopied(t *testing.T) {
	for _, markers := range []bool{false, true} {
		f := NewFramer(0, markers, true)
		payload := make([]byte, 5000)
		iov, err := f.AppendFPDU(nil, make([]byte, 14), payload)
		if err != nil {
			t.Fatal(err)
		}
		// Every payload octet reaches the iovecs by reference.
		lo, hi := uintptr(unsafe.Pointer(&payload[0])), uintptr(unsafe.Pointer(&payload[0]))+uintptr(len(payload))
		covered := 0
		for _, v := range iov {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			if p >= lo && p < hi {
				covered += len(v)
			}
		}
		if covered != len(payload) {
			t.Errorf("markers %v: %d of %d payload octets referenced in place", markers, covered, len(payload))
		}
		// Without Markers: [ULPDU_Length+header], payload, [PAD+CRC].
		if !markers && len(iov) != 3 {
			t.Errorf("no Markers: %d iovecs, want 3", len(iov))
		}
	}
}

// Consecutive FPDUs share iovecs for their small parts: the PAD and CRC of
// one and the ULPDU_Length and header of the next.
func TestFramerMergesSmallParts(t *testing.T) {
	f := NewFramer(0, false, true)
	var iov [][]byte
	const n = 100
	for range n {
		iov, _ = f.AppendFPDU(iov, make([]byte, 14), make([]byte, 1000))
	}
	if len(iov) != 2*n+1 {
		t.Fatalf("%d FPDUs in %d iovecs, want %d", n, len(iov), 2*n+1)
	}
	// Header-only FPDUs merge into a single iovec.
	f.Reset()
	iov = iov[:0]
	for range n {
		iov, _ = f.AppendFPDU(iov, make([]byte, 28), nil)
	}
	if len(iov) != 1 {
		t.Fatalf("%d header-only FPDUs in %d iovecs, want 1", n, len(iov))
	}
}

func TestFramerCRCOff(t *testing.T) {
	f := NewFramer(0, false, false)
	iov, _ := f.AppendFPDU(nil, []byte{1, 2, 3}, nil)
	got := flatten(iov)
	want := []byte{0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
}

func TestFramerULPDUTooLong(t *testing.T) {
	f := NewFramer(0, true, true)
	pos := f.Pos()
	iov, err := f.AppendFPDU(nil, make([]byte, 14), make([]byte, MaxULPDU-13))
	if !errors.Is(err, ErrULPDUTooLong) || len(iov) != 0 || f.Pos() != pos {
		t.Fatalf("err %v, %d iovecs, pos moved %d", err, len(iov), f.Pos()-pos)
	}
	if _, err := f.AppendFPDU(nil, make([]byte, 14), make([]byte, MaxULPDU-14)); err != nil {
		t.Fatalf("65535-octet ULPDU: %v", err)
	}
}

// Framing a batch allocates nothing, referencing the payload or staging it.
func TestFramingAllocatesNothing(t *testing.T) {
	for _, staged := range []bool{false, true} {
		for _, markers := range []bool{false, true} {
			f := NewFramer(0, markers, true)
			if staged {
				f.UseStaging(make([]byte, 256<<10))
			}
			hdr, payload := make([]byte, 14), make([]byte, 64<<10-14-100)
			iov := make([][]byte, 0, 512)
			frame := func() {
				iov = iov[:0]
				f.Reset()
				for range 3 {
					iov, _ = f.AppendFPDU(iov, hdr, payload)
				}
			}
			frame()
			if a := testing.AllocsPerRun(100, frame); a != 0 {
				t.Errorf("staged %v markers %v: %v allocations per batch", staged, markers, a)
			}
		}
	}
}

// randomULPDUs returns n ULPDUs (header, payload) of assorted sizes.
func randomULPDUs(r *rand.Rand, n int) [][2][]byte {
	out := make([][2][]byte, n)
	for i := range out {
		h := make([]byte, []int{0, 14, 18, 46}[r.IntN(4)])
		var p []byte
		switch r.IntN(6) {
		case 0:
		case 1:
			p = make([]byte, r.IntN(8))
		case 2:
			p = make([]byte, 500+r.IntN(20))
		case 5:
			p = make([]byte, MaxULPDU-len(h)-r.IntN(3))
		default:
			p = make([]byte, r.IntN(9000))
		}
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		for j := range p {
			p[j] = byte(j*7 + i)
		}
		out[i] = [2][]byte{h, p}
	}
	return out
}

// The Deframer recovers exactly the ULPDUs the Framer framed, referencing
// or staging, for every Marker and CRC setting, any stream start (including
// across the 2^32 wrap), any split of the stream into reads, and any mix of
// staged and direct reads.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		markers, crc := iter%2 == 0, iter%4 < 2
		seqStart := r.Uint32()
		if iter%3 == 0 {
			seqStart = -uint32(r.IntN(1 << 16)) // wraps inside the stream
		}
		ulpdus := randomULPDUs(r, 1+r.IntN(12))
		f := NewFramer(seqStart, markers, crc)
		if iter%3 == 1 {
			f.UseStaging(make([]byte, MaxFPDUStreamLen+r.IntN(3*MaxFPDUStreamLen)))
		}
		var stream []byte
		for _, u := range ulpdus {
			iov, err := f.AppendFPDU(nil, u[0], u[1])
			if errors.Is(err, ErrStagingFull) {
				f.Reset()
				iov, err = f.AppendFPDU(nil, u[0], u[1])
			}
			if err != nil {
				t.Fatal(err)
			}
			stream = append(stream, flatten(iov)...)
			if r.IntN(3) == 0 {
				f.Reset()
			}
		}
		got, err := deframeMixed(r, NewDeframer(seqStart, markers, crc), stream)
		if err != nil {
			t.Fatalf("iter %d (markers %v crc %v start %#x): %v", iter, markers, crc, seqStart, err)
		}
		if len(got) != len(ulpdus) {
			t.Fatalf("iter %d: %d ULPDUs back, want %d", iter, len(got), len(ulpdus))
		}
		for i, u := range ulpdus {
			if want := append(bytes.Clone(u[0]), u[1]...); !bytes.Equal(got[i], want) {
				t.Fatalf("iter %d: ULPDU %d differs (len %d, want %d)", iter, i, len(got[i]), len(want))
			}
		}
	}
}

// deframeMixed deframes stream like an engine would: reads of random size
// into a staging buffer handed to Next, and, once a ULPDU has started, direct
// reads of a random part of its remainder into the destination buffer,
// filled iovec by iovec as readv would.
func deframeMixed(r *rand.Rand, d *Deframer, stream []byte) ([][]byte, error) {
	var out [][]byte
	var cur []byte
	var iov [][]byte
	for len(stream) > 0 {
		if rem := d.Remaining(); rem > 0 && r.IntN(2) == 0 {
			n := 1 + r.IntN(rem)
			dst := cur[len(cur) : len(cur)+n]
			iov = d.PlanDirect(iov[:0], dst)
			for _, v := range iov {
				stream = stream[copy(v, stream):]
			}
			if err := d.CommitDirect(dst); err != nil {
				return out, err
			}
			cur = cur[:len(cur)+n]
			continue
		}
		raw := stream[:min(len(stream), 1+r.IntN(2000))]
		ev, data, n, err := d.Next(raw)
		stream = stream[n:]
		switch ev {
		case ULPDUStart:
			cur = make([]byte, 0, d.ULPDULen())
		case ULPDUData:
			cur = append(cur, data...)
		case FPDUEnd:
			out = append(out, cur)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// A payload gathered from several slices frames exactly like the same
// octets in one slice.
func TestAppendFPDUvMatchesAppendFPDU(t *testing.T) {
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	for _, markers := range []bool{false, true} {
		for _, cuts := range [][]int{{0}, {1}, {500, 501}, {0, 0, 2999}, {1000, 2000}} {
			a, b := NewFramer(100, markers, true), NewFramer(100, markers, true)
			one, _ := a.AppendFPDU(nil, []byte("hdr"), payload)
			var parts [][]byte
			prev := 0
			for _, c := range cuts {
				parts = append(parts, payload[prev:c])
				prev = c
			}
			parts = append(parts, payload[prev:])
			many, err := b.AppendFPDUv(nil, []byte("hdr"), parts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(flatten(one), flatten(many)) || a.Pos() != b.Pos() {
				t.Fatalf("markers %v cuts %v: gathered framing differs", markers, cuts)
			}
		}
	}
	f := NewFramer(0, false, true)
	big := make([]byte, 40000)
	if _, err := f.AppendFPDUv(nil, nil, [][]byte{big, big}); !errors.Is(err, ErrULPDUTooLong) {
		t.Fatalf("80000-octet gathered ULPDU: %v", err)
	}
}
