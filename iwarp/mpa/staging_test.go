package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"unsafe"
)

// stagingFramer returns a Framer that stages into a buffer of n octets.
func stagingFramer(seqStart uint32, markers, crc bool, n int) *Framer {
	f := NewFramer(seqStart, markers, crc)
	f.UseStaging(make([]byte, n))
	return f
}

// A staging Framer sends exactly the octets of a referencing one, for every
// Marker phase, ULPDU length around the Marker interval, header split and
// Marker and CRC setting, with the FPDUs of a batch in a single iovec.
func TestStagingMatchesReferencing(t *testing.T) {
	ulens := []int{0, 1, 2, 3, 4, 5, 13, 14, 15, 18, 490, 491, 492, 493, 500, 505, 506, 507, 508, 509, 510, 1012, 1016, 4096, MaxULPDU}
	payload := make([]byte, MaxULPDU)
	for i := range payload {
		payload[i] = byte(i*31 + i>>8)
	}
	for _, markers := range []bool{false, true} {
		for _, crc := range []bool{false, true} {
			for _, seqStart := range []uint32{0, 0xfffff000} {
				for off := uint32(0); off < MarkerInterval; off += 4 {
					ref := NewFramer(seqStart, markers, crc)
					st := stagingFramer(seqStart, markers, crc, 4*MaxFPDUStreamLen)
					ref.pos += off
					st.pos += off
					var a, b [][]byte
					for i, ulen := range ulens {
						hdr := payload[:min(ulen, []int{0, 14, 18, 28}[i%4])]
						p := payload[len(hdr):ulen]
						var err error
						if a, err = ref.AppendFPDU(a, hdr, p); err != nil {
							t.Fatal(err)
						}
						if b, err = st.AppendFPDU(b, hdr, p); errors.Is(err, ErrStagingFull) {
							if len(b) != 1 {
								t.Fatalf("markers %v crc %v offset %d: a full staging buffer in %d iovecs, want 1", markers, crc, off, len(b))
							}
							a, b = [][]byte{flatten(a)}, [][]byte{flatten(b)}
							st.Reset()
							b, err = st.AppendFPDU(b, hdr, p)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					if !bytes.Equal(flatten(a), flatten(b)) || ref.Pos() != st.Pos() {
						t.Fatalf("markers %v crc %v seqStart %#x offset %d: staged framing differs", markers, crc, seqStart, off)
					}
				}
			}
		}
	}
}

// The Marker cases of RFC 5044 4.3 and 4.4 at their exact places: each
// staged FPDU has its Marker where the stream position says, with the
// FPDUPTR 4.3 gives, and a CRC over exactly the octets 4.4 lists, computed
// here independently with hash/crc32.
func TestStagingMarkerPlacement(t *testing.T) {
	tests := []struct {
		name string
		off  uint32 // stream position within the Marker interval where the FPDU is framed
		hdr  int
		ulen int
		// where the Marker lands, from the first stream octet of the FPDU,
		// and its FPDUPTR (FPDUs and Markers are 4-aligned in the stream,
		// so none falls inside ULPDU_Length or the CRC)
		at, ptr int
	}{
		// Before ULPDU_Length: FPDUPTR 0, and the Marker belongs to the
		// FPDU after it (rule 2).
		{"between FPDUs", 0, 14, 100, 0, 0},
		{"after ULPDU_Length and 2 header octets", 512 - 4, 14, 100, 4, 4},
		{"inside the header", 512 - 8, 14, 100, 8, 8},
		{"between header and payload", 512 - 16, 14, 100, 16, 16},
		{"inside the payload", 512 - 40, 14, 100, 40, 40},
		// 2+14 octets of ULPDU_Length and ULPDU, no PAD: the Marker falls
		// just before the CRC and is inside the FPDU (rule 1).
		{"just before the CRC", 512 - 16, 14, 14, 16, 16},
		// 2+13 octets and one of PAD: the Marker follows the PAD.
		{"after the PAD", 512 - 16, 13, 13, 16, 16},
	}
	for _, tc := range tests {
		for _, seqStart := range []uint32{0, 0xffffff10} {
			f := stagingFramer(seqStart, true, true, MaxFPDUStreamLen)
			f.pos += tc.off
			hdr := bytes.Repeat([]byte{0xa5}, tc.hdr)
			p := bytes.Repeat([]byte{0x5a}, tc.ulen-tc.hdr)
			iov, err := f.AppendFPDU(nil, hdr, p)
			if err != nil {
				t.Fatal(err)
			}
			fp := flatten(iov)
			if len(fp) != FPDULen(tc.ulen)+MarkerSize {
				t.Fatalf("%s: %d stream octets, want the FPDU's %d and one Marker", tc.name, len(fp), FPDULen(tc.ulen))
			}
			m := fp[tc.at : tc.at+MarkerSize]
			if got := binary.BigEndian.Uint32(m); got != uint32(tc.ptr) {
				t.Errorf("%s: Marker %08x at %d, want FPDUPTR %d", tc.name, got, tc.at, tc.ptr)
			}
			// Without the Marker the octets are the plain FPDU.
			plain := append(bytes.Clone(fp[:tc.at]), fp[tc.at+MarkerSize:]...)
			u := int(binary.BigEndian.Uint16(plain))
			if u != tc.ulen || !bytes.Equal(plain[2:2+tc.hdr], hdr) || !bytes.Equal(plain[2+tc.hdr:2+tc.ulen], p) {
				t.Errorf("%s: FPDU octets around the Marker are wrong: %x", tc.name, plain)
			}
			// The CRC covers every stream octet of the FPDU before the CRC
			// field, the Marker included wherever it fell.
			crcAt := len(fp) - CRCSize
			want := crc32.Checksum(fp[:crcAt], crc32.MakeTable(crc32.Castagnoli))
			if got := binary.LittleEndian.Uint32(fp[crcAt:]); got != want {
				t.Errorf("%s: CRC %08x, want %08x", tc.name, got, want)
			}
			// And the Deframer takes it, Marker checks included.
			d := NewDeframer(seqStart, true, true)
			d.pos, d.endPos = seqStart+tc.off, seqStart+tc.off
			got, err := deframeAll(d, fp, 7)
			if err != nil || len(got) != 1 || !bytes.Equal(got[0], append(hdr, p...)) {
				t.Errorf("%s: deframed %d ULPDUs, err %v", tc.name, len(got), err)
			}
		}
	}
}

// An FPDU that does not fit the rest of the staging buffer changes nothing;
// after Reset it frames.
func TestStagingFull(t *testing.T) {
	for _, markers := range []bool{false, true} {
		f := stagingFramer(0, markers, true, MaxFPDUStreamLen)
		payload := make([]byte, 40000)
		iov, err := f.AppendFPDU(nil, nil, payload)
		if err != nil {
			t.Fatal(err)
		}
		pos, before := f.Pos(), flatten(iov)
		iov, err = f.AppendFPDU(iov, nil, payload)
		if !errors.Is(err, ErrStagingFull) || f.Pos() != pos || !bytes.Equal(flatten(iov), before) {
			t.Fatalf("markers %v: err %v, pos moved %d, iovecs changed %v", markers, err, f.Pos()-pos, !bytes.Equal(flatten(iov), before))
		}
		f.Reset()
		if _, err := f.AppendFPDU(nil, nil, payload); err != nil {
			t.Fatalf("markers %v: after Reset: %v", markers, err)
		}
	}
}

// MaxFPDUStreamLen is the largest FPDUStreamLen over every Marker phase, so
// a staging buffer of that size holds any FPDU.
func TestMaxFPDUStreamLen(t *testing.T) {
	most := 0
	for off := uint32(0); off < MarkerInterval; off += 4 {
		f := NewFramer(0, true, true)
		f.pos = off
		most = max(most, f.FPDUStreamLen(MaxULPDU))
	}
	if most != MaxFPDUStreamLen {
		t.Fatalf("largest FPDU takes %d stream octets, MaxFPDUStreamLen is %d", most, MaxFPDUStreamLen)
	}
	f := stagingFramer(0, true, true, MaxFPDUStreamLen)
	if _, err := f.AppendFPDU(nil, nil, make([]byte, MaxULPDU)); err != nil {
		t.Fatal(err)
	}
}

func ExampleFramer_UseStaging() {
	f := NewFramer(0, true, true)
	f.UseStaging(make([]byte, 2*MaxFPDUStreamLen))
	var iov [][]byte
	for range 3 {
		iov, _ = f.AppendFPDU(iov, make([]byte, 14), make([]byte, 4000))
	}
	fmt.Println(len(iov), "iovec of", len(iov[0]), "octets")
	// Output: 1 iovec of 12156 octets
}

// With room for it, staging puts every stream octet at an address that
// agrees with its stream position modulo the cache line, across Resets, so
// that Marker intervals start on cache lines.
func TestStagingAlignsToTheStream(t *testing.T) {
	const seqStart = 0x1234567
	f := NewFramer(seqStart, true, true)
	buf := make([]byte, MaxFPDUStreamLen+2*stageAlign+1)
	f.UseStaging(buf[1:]) // a misaligned buffer
	payload := make([]byte, 5000)
	for i := range 50 {
		f.Reset()
		start := f.Pos()
		iov, err := f.AppendFPDU(nil, nil, payload[:1+i*97])
		if err != nil {
			t.Fatal(err)
		}
		if addr := uintptr(unsafe.Pointer(&iov[0][0])); addr%stageAlign != uintptr(start-seqStart)%stageAlign {
			t.Fatalf("FPDU %d at stream offset %d staged at address %#x", i, start-seqStart, addr)
		}
	}
}
