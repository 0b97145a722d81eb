package mpa

import (
	"fmt"
	"strings"
	"testing"
)

// benchSizes are the ULPDU sizes of the framing benchmarks; "64KiB" is the
// largest ULPDU MPA can carry (65535 octets).
var benchSizes = []struct {
	name string
	ulen int
}{{"4KiB", 4096}, {"64KiB", MaxULPDU}}

var benchModes = []struct {
	name         string
	markers, crc bool
}{
	{"plain", false, false},
	{"crc", false, true},
	{"markers", true, false},
	{"markers+crc", true, true},
}

// BenchmarkFrame measures the transmit path: "staged" is the copy into a
// staging buffer a sender with Markers makes (UseStaging).
func BenchmarkFrame(b *testing.B) {
	for _, sz := range benchSizes {
		for _, m := range append(benchModes, struct {
			name         string
			markers, crc bool
		}{"markers+crc/staged", true, true}) {
			b.Run(fmt.Sprintf("%s/%s", sz.name, m.name), func(b *testing.B) {
				f := NewFramer(0, m.markers, m.crc)
				if strings.HasSuffix(m.name, "/staged") {
					f.UseStaging(make([]byte, MaxFPDUStreamLen+2*stageAlign))
				}
				hdr, payload := make([]byte, 14), make([]byte, sz.ulen-14)
				iov := make([][]byte, 0, 512)
				b.SetBytes(int64(sz.ulen))
				b.ReportAllocs()
				for b.Loop() {
					f.Reset()
					iov, _ = f.AppendFPDU(iov[:0], hdr, payload)
				}
			})
		}
	}
}

// BenchmarkDeframe measures the receive path: "staged" hands the Deframer
// octets already in memory, as a reader that copies would; "direct" plans and
// commits a read straight into the destination, as the engine does (the
// octets are already in place, so this is the Deframer's own cost: Marker
// handling and the CRC over the placed payload).
func BenchmarkDeframe(b *testing.B) {
	for _, sz := range benchSizes {
		for _, m := range benchModes {
			for _, direct := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/staged", sz.name, m.name)
				if direct {
					name = fmt.Sprintf("%s/%s/direct", sz.name, m.name)
				}
				b.Run(name, func(b *testing.B) {
					benchDeframe(b, sz.ulen, m.markers, m.crc, direct)
				})
			}
		}
	}
}

func benchDeframe(b *testing.B, ulen int, markers, crc, direct bool) {
	// A stream of 64 FPDUs: Markers fall at a different place in each.
	const n = 64
	f := NewFramer(0, markers, crc)
	var stream []byte
	for range n {
		iov, _ := f.AppendFPDU(nil, make([]byte, 14), make([]byte, ulen-14))
		stream = append(stream, flatten(iov)...)
	}
	dst := make([]byte, ulen)
	plan := make([][]byte, 0, maxPlanMarkers*2)
	var d *Deframer
	var raw []byte
	b.SetBytes(int64(ulen))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%n == 0 {
			d, raw = NewDeframer(0, markers, crc), stream
		}
		i++
		for {
			if direct && d.Remaining() > 0 {
				// Fill the plan as readv would.
				buf := dst[:d.Remaining()]
				plan = d.PlanDirect(plan[:0], buf)
				for _, v := range plan {
					raw = raw[copy(v, raw):]
				}
				if err := d.CommitDirect(buf); err != nil && crc {
					_ = err // payload in dst is zero like the stream's: CRC holds
				}
				continue
			}
			ev, _, k, err := d.Next(raw)
			if err != nil {
				b.Fatal(err)
			}
			raw = raw[k:]
			if ev == FPDUEnd {
				break
			}
		}
	}
}

// BenchmarkCRCCold measures crcUpdate over 1 MiB, in FPDU-sized pieces,
// from a working set in the CPU's nearest cache ("hot": one MiB) and from
// one far larger than its L2 ("cold": 32 MiB), as a sender's CRC finds the
// data of a write that FUSE copied a round trip earlier.
func BenchmarkCRCCold(b *testing.B) {
	for _, c := range []struct {
		name string
		bufs int
	}{{"hot", 1}, {"cold", 32}} {
		b.Run(c.name, func(b *testing.B) {
			bufs := make([][]byte, c.bufs)
			for i := range bufs {
				bufs[i] = make([]byte, 1<<20)
				for j := range bufs[i] {
					bufs[i][j] = byte(j ^ i)
				}
			}
			b.SetBytes(1 << 20)
			var sum uint32
			i := 0
			for b.Loop() {
				p := bufs[i%len(bufs)]
				for off := 0; off < len(p); off += MaxULPDU {
					sum ^= crcUpdate(0, p[off:min(off+MaxULPDU, len(p))])
				}
				i++
			}
			_ = sum
		})
	}
}
