package mpa

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// directRead runs one FPDU stream through d: Next over the octets before
// stream offset cut (which may end inside a Marker), then one direct read of
// up to n ULPDU octets into place, then Next over the rest. It returns the
// ULPDU and the error the FPDU ended with.
func directRead(d *Deframer, stream []byte, cut, n int) ([]byte, error) {
	var out []byte
	next := func(raw []byte) ([]byte, error) {
		for len(raw) > 0 {
			ev, data, k, err := d.Next(raw)
			raw = raw[k:]
			switch ev {
			case ULPDUStart:
				out = make([]byte, 0, d.ULPDULen())
			case ULPDUData:
				out = append(out, data...)
			}
			if err != nil {
				return raw, err
			}
		}
		return raw, nil
	}
	if _, err := next(stream[:cut]); err != nil {
		return out, err
	}
	rest := stream[cut:]
	if n = min(n, d.Remaining()); n > 0 {
		dst := out[len(out) : len(out)+n]
		for _, v := range d.PlanDirect(nil, dst) {
			rest = rest[copy(v, rest):]
		}
		if err := d.CommitDirect(dst); err != nil {
			return out, err
		}
		out = out[:len(out)+n]
	}
	_, err := next(rest)
	return out, err
}

// A direct read may begin at any point of a ULPDU: between Markers, on one,
// or inside one Next has begun, and may end anywhere, its last octets and
// Markers overhanging dst. It places the ULPDU exactly, and a Marker with a
// wrong FPDUPTR anywhere is MPA error 3 (or, with its CRC left stale,
// error 2).
func TestDirectReadAtEveryPhase(t *testing.T) {
	payload := make([]byte, 1500)
	for i := range payload {
		payload[i] = byte(i*7 + i>>8)
	}
	lens := []int{1, 2, 3, 4, 5, 507, 508, 509, 512, 1016, 1017, len(payload)}
	for _, crc := range []bool{false, true} {
		for _, lead := range []int{0, 1, 2, 3, 250, 505} {
			// A first FPDU of lead octets puts the second one at another
			// phase of the Marker interval.
			f := NewFramer(0, true, crc)
			iov, err := f.AppendFPDU(nil, nil, payload[:lead])
			if err != nil {
				t.Fatal(err)
			}
			stream := flatten(iov)
			first := len(stream)
			iov, err = f.AppendFPDU(nil, nil, payload)
			if err != nil {
				t.Fatal(err)
			}
			stream = append(stream, flatten(iov)...)
			var marks []int // the Markers inside the second FPDU's ULPDU
			for m := (first + MarkerInterval) / MarkerInterval * MarkerInterval; m < len(stream)-CRCSize; m += MarkerInterval {
				marks = append(marks, m)
			}
			for cut := first + LengthSize + MarkerSize; cut < first+2*MarkerInterval; cut++ {
				for _, n := range lens {
					name := fmt.Sprintf("crc %v lead %d cut %d len %d", crc, lead, cut, n)
					got, err := directRead(NewDeframer(0, true, crc), stream, cut, n)
					if err != nil || !bytes.Equal(got, payload) {
						t.Fatalf("%s: %d octets placed (equal %v), %v", name, len(got), bytes.Equal(got, payload), err)
					}
					if n != 509 && n != len(payload) {
						continue // corrupted Markers: two lengths suffice
					}
					for _, m := range marks {
						bad := bytes.Clone(stream)
						bad[m+3] ^= 0x10 // FPDUPTR
						want := ErrCRC
						if !crc {
							want = ErrMarker
						}
						if _, err := directRead(NewDeframer(0, true, crc), bad, cut, n); !errors.Is(err, want) {
							t.Fatalf("%s, Marker at %d corrupted: %v, want %v", name, m, err, want)
						}
						if crc {
							putCRC(bad[len(bad)-CRCSize:], crcUpdate(0, bad[first:len(bad)-CRCSize]))
							if _, err := directRead(NewDeframer(0, true, crc), bad, cut, n); !errors.Is(err, ErrMarker) {
								t.Fatalf("%s, Marker at %d corrupted, CRC made good: %v, want %v", name, m, err, ErrMarker)
							}
						}
					}
				}
			}
		}
	}
}
