package mpa

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// unhex decodes an annotated hex dump: hex octets, whitespace ignored.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 5044 section 4.4, Figure 5: the first FPDU of a stream, led by a
// Marker, carrying a DDP untagged Send (MSN 1) of 24 zero octets.
const figure5 = `
	00000000
	002a
	4143 00000000 00000000 00000001 00000000
	000000000000000000000000000000000000000000000000
	52239983`

// RFC 5044 section 4.4, Figure 6: the second FPDU of the stream, at stream
// offset 0x1ec, with a Marker at 0x200 (FPDUPTR 0x0014) inside its ULPDU.
const figure6 = `
	002a
	4143 00000000 00000000 00000002 00000000
	00000014
	000000000000000000000000000000000000000000000000
	84925898`

// sendHeader is the 18-octet DDP untagged header of both figures: T=0, L=1,
// DV=1; RDMAP RV=1 Send; QN 0; the given MSN; MO 0.
func sendHeader(msn byte) []byte {
	h := make([]byte, 18)
	h[0], h[1], h[13] = 0x41, 0x43, msn
	return h
}

// flatten joins iovecs into the octets a writev would send.
func flatten(iov [][]byte) []byte {
	var b []byte
	for _, v := range iov {
		b = append(b, v...)
	}
	return b
}

// rfcStream frames the two FPDUs of figures 5 and 6 at the start of a stream:
// figure 5's FPDU, one FPDU filling the stream up to 0x1ec as the RFC
// describes ("the first FPDU ... had a length of 492 octets"), then figure 6.
func rfcStream(t testing.TB, seqStart uint32) (stream []byte, fig5, fig6 [2]int) {
	return rfcStreamOf(t, NewFramer(seqStart, true, true), seqStart)
}

// rfcStreamOf is rfcStream framed by f, which starts at seqStart.
func rfcStreamOf(t testing.TB, f *Framer, seqStart uint32) (stream []byte, fig5, fig6 [2]int) {
	t.Helper()
	var iov [][]byte
	var err error
	iov, err = f.AppendFPDU(iov, sendHeader(1), make([]byte, 24))
	if err != nil {
		t.Fatal(err)
	}
	fig5 = [2]int{0, int(f.Pos() - seqStart)}
	// Fill to 0x1ec: an FPDU of 0x1ec-0x34 stream octets with no Marker in it.
	fill := f.MaxULPDUIn(0x1ec - fig5[1])
	if got := f.FPDUStreamLen(fill); got != 0x1ec-fig5[1] {
		t.Fatalf("filler FPDU occupies %#x octets, want %#x", got, 0x1ec-fig5[1])
	}
	iov, _ = f.AppendFPDU(iov, nil, make([]byte, fill))
	start := int(f.Pos() - seqStart)
	iov, _ = f.AppendFPDU(iov, sendHeader(2), make([]byte, 24))
	fig6 = [2]int{start, int(f.Pos() - seqStart)}
	return flatten(iov), fig5, fig6
}

// Both ways of framing, payload referenced and payload staged, produce the
// RFC's octets.
func TestRFC5044Figure5And6Framer(t *testing.T) {
	for _, staged := range []bool{false, true} {
		for _, seqStart := range []uint32{0, 11, 0xffffff00, 0xfffffe14} {
			f := NewFramer(seqStart, true, true)
			if staged {
				f.UseStaging(make([]byte, MaxFPDUStreamLen))
			}
			stream, fig5, fig6 := rfcStreamOf(t, f, seqStart)
			if got, want := stream[fig5[0]:fig5[1]], unhex(t, figure5); !bytes.Equal(got, want) {
				t.Errorf("staged %v seqStart %#x: figure 5 FPDU\n got %x\nwant %x", staged, seqStart, got, want)
			}
			if fig6[0] != 0x1ec {
				t.Errorf("staged %v seqStart %#x: figure 6 FPDU starts at %#x, want 0x1ec", staged, seqStart, fig6[0])
			}
			if got, want := stream[fig6[0]:fig6[1]], unhex(t, figure6); !bytes.Equal(got, want) {
				t.Errorf("staged %v seqStart %#x: figure 6 FPDU\n got %x\nwant %x", staged, seqStart, got, want)
			}
		}
	}
}

// deframeAll runs a Deframer over stream in chunks of the given size and
// returns the ULPDUs it delivered and the first error.
func deframeAll(d *Deframer, stream []byte, chunk int) ([][]byte, error) {
	var out [][]byte
	var cur []byte
	for len(stream) > 0 {
		raw := stream[:min(chunk, len(stream))]
		for len(raw) > 0 {
			ev, data, n, err := d.Next(raw)
			raw, stream = raw[n:], stream[n:]
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
	}
	return out, nil
}

func TestRFC5044Figure5And6Deframer(t *testing.T) {
	stream, _, _ := rfcStream(t, 0)
	for _, chunk := range []int{1, 3, 4, 7, 64, 512, len(stream)} {
		got, err := deframeAll(NewDeframer(0, true, true), stream, chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got) != 3 {
			t.Fatalf("chunk %d: %d ULPDUs, want 3", chunk, len(got))
		}
		for i, msn := range map[int]byte{0: 1, 2: 2} {
			want := append(sendHeader(msn), make([]byte, 24)...)
			if !bytes.Equal(got[i], want) {
				t.Errorf("chunk %d: ULPDU %d = %x, want %x", chunk, i, got[i], want)
			}
		}
	}
	// Figure 5 on its own is a complete stream too.
	got, err := deframeAll(NewDeframer(0, true, true), unhex(t, figure5), 5)
	if err != nil || len(got) != 1 || len(got[0]) != 42 {
		t.Fatalf("figure 5 alone: %d ULPDUs, err %v", len(got), err)
	}
}

func TestRFC5044Figure6CRCAndMarkerErrors(t *testing.T) {
	stream, _, fig6 := rfcStream(t, 0)
	corrupt := func(at int, recrc bool) []byte {
		s := bytes.Clone(stream)
		s[at] ^= 0x40
		if recrc { // make the CRC valid again over the altered FPDU
			putCRC(s[fig6[1]-4:], crcUpdate(0, s[fig6[0]:fig6[1]-4]))
		}
		return s
	}
	tests := []struct {
		name   string
		stream []byte
		crc    bool
		want   error
	}{
		{"payload bit flip", corrupt(0x210, false), true, ErrCRC},
		{"CRC field bit flip", corrupt(0x21c, false), true, ErrCRC},
		{"Marker FPDUPTR wrong, CRC recomputed", corrupt(0x203, true), true, ErrMarker},
		{"Marker FPDUPTR wrong, CRC off", corrupt(0x203, false), false, ErrMarker},
		{"Marker wrong and CRC bad: CRC error wins", corrupt(0x203, false), true, ErrCRC},
		{"leading Marker nonzero", corrupt(0x3, false), false, ErrMarker},
		{"payload bit flip, CRC off", corrupt(0x210, false), false, nil},
		{"Marker Reserved set is ignored", corrupt(0x200, true), true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deframeAll(NewDeframer(0, true, tc.crc), tc.stream, 64)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want != nil && CodeOf(err) != tc.want.(*Error).Code {
				t.Fatalf("CodeOf = %d, want %d", CodeOf(err), tc.want.(*Error).Code)
			}
		})
	}
}
