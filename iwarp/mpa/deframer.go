package mpa

import "fmt"

// Event tells the caller of Deframer.Next what the octets it consumed were.
type Event uint8

const (
	// NeedMore: every octet offered was consumed (Markers, parts of a
	// ULPDU_Length, PAD or CRC field) and more are needed for an event.
	NeedMore Event = iota
	// ULPDUStart: an FPDU's ULPDU_Length field was read; ULPDULen is valid.
	ULPDUStart
	// ULPDUData: data holds the next octets of the current ULPDU.
	ULPDUData
	// FPDUEnd: the FPDU's PAD and CRC were read and checked; the ULPDU is
	// complete. A CRC or Marker error is returned with this event.
	FPDUEnd
)

func (e Event) String() string {
	switch e {
	case NeedMore:
		return "NeedMore"
	case ULPDUStart:
		return "ULPDUStart"
	case ULPDUData:
		return "ULPDUData"
	case FPDUEnd:
		return "FPDUEnd"
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// Receive states: which field of the FPDU the next non-Marker octet is in.
const (
	inLength  = iota // ULPDU_Length
	inULPDU          // ULPDU
	inTrailer        // PAD and CRC
)

// maxPlanMarkers bounds the Markers one direct read can cross: a ULPDU of at
// most 65535 octets spans at most 130 Marker intervals, plus one Marker
// already begun.
const maxPlanMarkers = 132

// Deframer is the receive half of MPA Full Operation (RFC 5044 sections 4
// and 6). It follows the TCP stream position from the start of Full
// Operation, strips Markers and checks each against the FPDU the ULPDU_Length
// fields locate, and checks every FPDU's CRC over exactly the octets 4.4
// lists.
//
// Octets reach it two ways, freely mixed. Next consumes octets the caller
// has already read (a staging buffer) and hands back ULPDU octets as
// sub-slices. PlanDirect and CommitDirect let the caller read the rest of a
// ULPDU straight from the socket into its final buffer with one readv; with
// Markers, CommitDirect then squeezes them out of it in place.
//
// After it reports an error the Deframer delivers nothing more (section 8).
type Deframer struct {
	markers  bool
	crc      bool
	seqStart uint32
	pos      uint32 // stream position of the next octet
	endPos   uint32 // stream position just past the last complete FPDU

	state   int
	fpduPos uint32 // stream position of the current FPDU's ULPDU_Length
	ulen    int    // the current FPDU's ULPDU_Length
	left    int    // octets left in the current field (ULPDU or trailer)
	sum     uint32 // running CRC32c of the current FPDU
	badMark bool   // a Marker in the current FPDU disagreed with the framing

	field  [CRCSize + 3]byte // ULPDU_Length, or PAD and CRC, as they arrive
	fieldN int
	mark   [MarkerSize]byte // a Marker as it arrives
	markN  int

	spill [maxPlanMarkers * MarkerSize]byte // a direct read's overhang past dst

	err error
}

// NewDeframer returns a Deframer for a half connection whose first Full
// Operation octet is at stream position seqStart (0 unless testing
// wrap-around). markers says whether we asked the peer for Markers; crc
// whether CRCs are checked.
func NewDeframer(seqStart uint32, markers, crc bool) *Deframer {
	return &Deframer{markers: markers, crc: crc, seqStart: seqStart, pos: seqStart, endPos: seqStart}
}

// Pos returns the stream position of the next octet the Deframer expects.
func (d *Deframer) Pos() uint32 { return d.pos }

// ULPDULen returns the current FPDU's ULPDU_Length (valid from ULPDUStart).
func (d *Deframer) ULPDULen() int { return d.ulen }

// Remaining returns the octets of the current ULPDU not yet consumed.
func (d *Deframer) Remaining() int {
	if d.state != inULPDU {
		return 0
	}
	return d.left
}

// AtBoundary reports whether the stream so far ends exactly where the last
// FPDU ended: a connection that ends here cut no FPDU short (not even a
// Marker that would have led the next one).
func (d *Deframer) AtBoundary() bool { return d.pos == d.endPos }

// EndOfStream reports the end of the TCP stream (FIN, RST or loss) as MPA
// error 1, saying whether it cut an FPDU short, and stops the Deframer.
func (d *Deframer) EndOfStream() error {
	if d.err != nil {
		return d.err
	}
	if d.AtBoundary() {
		d.err = fmt.Errorf("%w at stream offset %d, between FPDUs", ErrLLPLost, d.pos-d.seqStart)
	} else {
		d.err = fmt.Errorf("%w at stream offset %d, inside the FPDU that began at %d",
			ErrLLPLost, d.pos-d.seqStart, d.fpduPos-d.seqStart)
	}
	return d.err
}

// Err returns the error that stopped the Deframer, if any.
func (d *Deframer) Err() error { return d.err }

// untilMarker returns the stream octets before the next Marker (0: a Marker
// starts here, or is partly read); huge with Markers off.
func (d *Deframer) untilMarker() int {
	if !d.markers {
		return 1 << 30
	}
	if d.markN > 0 {
		return 0
	}
	off := (d.pos - d.seqStart) % MarkerInterval
	if off == 0 {
		return 0
	}
	return int(MarkerInterval - off)
}

// betweenFPDUs reports whether no octet of the next FPDU has been read yet.
func (d *Deframer) betweenFPDUs() bool { return d.state == inLength && d.fieldN == 0 }

// endMarker accounts for a completely received Marker that started at stream
// position at: it belongs to, and is covered by the CRC of, the FPDU it
// falls in, or the next FPDU when it falls between two (4.3, 4.4).
func (d *Deframer) endMarker(m []byte, at uint32) {
	d.sum = d.crcSum(m)
	want := uint16(0)
	if !d.betweenFPDUs() {
		want = uint16(at - d.fpduPos)
	}
	if Marker(m).FPDUPTR() != want {
		d.badMark = true
	}
}

// Next consumes octets from raw, the stream octets that follow everything
// consumed so far, up to and including the next event, and returns the event
// and how many octets it consumed. For ULPDUData, data is the ULPDU octets
// (a sub-slice of raw, Markers removed). On an error every later call returns
// it again.
func (d *Deframer) Next(raw []byte) (ev Event, data []byte, n int, err error) {
	if d.err != nil {
		return NeedMore, nil, 0, d.err
	}
	for n < len(raw) {
		if gap := d.untilMarker(); gap == 0 {
			at := d.pos - uint32(d.markN)
			k := copy(d.mark[d.markN:], raw[n:])
			d.markN += k
			d.pos += uint32(k)
			n += k
			if d.markN == MarkerSize {
				d.markN = 0
				d.endMarker(d.mark[:], at)
			}
			continue
		} else if d.state == inULPDU {
			k := min(len(raw)-n, gap, d.left)
			data = raw[n : n+k]
			d.sum = d.crcSum(data)
			d.pos += uint32(k)
			d.left -= k
			if d.left == 0 {
				d.state, d.left = inTrailer, PadLen(d.ulen)+CRCSize
			}
			return ULPDUData, data, n + k, nil
		} else {
			k := min(len(raw)-n, gap, d.fieldLeft())
			if d.fieldN == 0 && d.state == inLength {
				d.fpduPos = d.pos
			}
			copy(d.field[d.fieldN:], raw[n:n+k])
			// ULPDU_Length and PAD octets enter the CRC as they arrive, so
			// that a Marker between PAD and CRC is summed in stream order.
			if covered := d.crcCovered(); d.fieldN < covered {
				d.sum = d.crcSum(d.field[d.fieldN:min(d.fieldN+k, covered)])
			}
			d.fieldN += k
			d.pos += uint32(k)
			n += k
			if d.fieldLeft() > 0 {
				continue
			}
			if d.state == inLength {
				d.startULPDU()
				return ULPDUStart, nil, n, nil
			}
			return FPDUEnd, nil, n, d.endFPDU()
		}
	}
	return NeedMore, nil, n, nil
}

// fieldLeft returns the octets still missing from the field being collected.
func (d *Deframer) fieldLeft() int {
	if d.state == inLength {
		return LengthSize - d.fieldN
	}
	return d.left - d.fieldN
}

// crcCovered returns how many octets of the field being collected the CRC
// covers: all of ULPDU_Length, the PAD but not the CRC of the trailer.
func (d *Deframer) crcCovered() int {
	if d.state == inLength {
		return LengthSize
	}
	return d.left - CRCSize
}

// startULPDU handles a complete ULPDU_Length field.
func (d *Deframer) startULPDU() {
	d.ulen = int(d.field[0])<<8 | int(d.field[1])
	d.fieldN = 0
	if d.ulen > 0 {
		d.state, d.left = inULPDU, d.ulen
	} else {
		d.state, d.left = inTrailer, PadLen(0)+CRCSize
	}
}

// endFPDU handles a complete PAD and CRC: it checks the CRC, then the
// Markers (error 3 is reported only for an FPDU whose CRC is valid), and
// readies the Deframer for the next FPDU.
func (d *Deframer) endFPDU() error {
	pad := d.left - CRCSize
	got, want := getCRC(d.field[pad:d.left]), d.sum
	bad := d.badMark
	d.endPos = d.pos
	d.state, d.fieldN, d.left, d.sum, d.badMark = inLength, 0, 0, 0, false
	switch {
	case d.crc && got != want:
		d.err = fmt.Errorf("%w: FPDU at stream offset %d: CRC field %08x, computed %08x",
			ErrCRC, d.fpduPos-d.seqStart, got, want)
	case bad:
		d.err = fmt.Errorf("%w: FPDU at stream offset %d", ErrMarker, d.fpduPos-d.seqStart)
	}
	return d.err
}

// PlanDirect appends to iov the iovecs that receive the next len(dst) octets
// of the current ULPDU straight into dst. With Markers off that is dst
// alone. With Markers on it is dst, then a spill buffer of the Deframer's
// own: the stream octets of those len(dst) ULPDU octets include the Markers
// among them, so the first len(dst) stream octets land in dst and the
// 4-octet overhang of each Marker in the spill; CommitDirect then squeezes
// the Markers out of dst in place. One iovec for the whole read keeps the
// kernel's copy as fast as without Markers: two iovecs per 512 octets
// cost it a third to a half of its throughput
// (BenchmarkTCPLoopbackMarkerSplit), where the squeeze rides along with the
// CRC pass (crcSqueeze) on octets still in cache.
// After a readv has filled every octet of the plan, call CommitDirect with
// the same dst. A dst longer than Remaining is planned only up to
// Remaining. A Marker that would follow the last octet is left out: it
// belongs to what comes next.
func (d *Deframer) PlanDirect(iov [][]byte, dst []byte) [][]byte {
	dst = dst[:min(len(dst), d.Remaining())]
	if len(dst) == 0 {
		return iov
	}
	iov = append(iov, dst)
	if over := d.markerOctets(len(dst)); over > 0 {
		iov = append(iov, d.spill[:over])
	}
	return iov
}

// markerOctets returns how many Marker octets the stream carries among its
// next n ULPDU octets: the rest of a Marker Next has begun, and every Marker
// that starts before the last of them.
func (d *Deframer) markerOctets(n int) int {
	if !d.markers || n == 0 {
		return 0
	}
	over := 0
	gap := d.untilMarker()
	if d.markN > 0 {
		over, gap = MarkerSize-d.markN, MarkerInterval-MarkerSize
	} else if gap == 0 {
		over, gap = MarkerSize, MarkerInterval-MarkerSize
	}
	if n > gap {
		over += MarkerSize * (1 + (n-gap-1)/(MarkerInterval-MarkerSize))
	}
	return over
}

// CommitDirect accounts for the octets a PlanDirect read placed in dst and
// the spill: it extends the CRC over them in stream order, checks the
// Markers, and squeezes the Markers out so that dst holds exactly the
// ULPDU's octets.
func (d *Deframer) CommitDirect(dst []byte) error {
	if d.err != nil {
		return d.err
	}
	if len(dst) > d.Remaining() {
		d.err = fmt.Errorf("mpa: direct read of %d octets past the ULPDU's remaining %d", len(dst), d.Remaining())
		return d.err
	}
	n := len(dst)
	if n == 0 {
		return nil
	}
	over := d.markerOctets(n)
	// The stream octets read, in order: dst[:n] then spill[:over].
	s := streamView{dst, d.spill[:over]}
	r := 0
	if d.markN > 0 {
		// The rest of a Marker Next had begun.
		at := d.pos - uint32(d.markN)
		k := MarkerSize - d.markN
		s.read(d.mark[d.markN:], 0)
		d.pos += uint32(k)
		d.markN = 0
		d.endMarker(d.mark[:], at)
		r = k
	}
	base := d.pos - uint32(r) // stream position of the read's first octet
	if !d.markers {
		d.sum = d.crcSum(dst)
	}
	// In stream order: sum each Marker and check it, sum each run of ULPDU
	// octets and move it down over the Markers before it. Every octet
	// moves to a lower index, so the forward copy is safe and never
	// reaches an octet not yet summed or a Marker not yet checked. Inside
	// a ULPDU no Marker falls between FPDUs: each points back to this
	// FPDU's start.
	w := 0
	for at, end := r, n+over; d.markers && at < end; {
		gap := d.untilMarkerAt(base + uint32(at))
		if gap > 0 {
			runEnd := min(at+gap, end)
			if at < n {
				e := min(runEnd, n)
				d.sum = d.crcSum(dst[at:e])
				if w != at {
					copy(dst[w:], dst[at:e])
				}
				w += e - at
				at = e
			}
			if at < runEnd {
				d.sum = d.crcSum(s.spill[at-n : runEnd-n])
				w += copy(dst[w:], s.spill[at-n:runEnd-n])
				at = runEnd
			}
			continue
		}
		// Whole Marker intervals inside dst: summed, checked and squeezed
		// in one pass.
		if k := (n - at) / MarkerInterval; k > 0 && d.crc {
			var bad bool
			d.sum, bad = crcSqueeze(d.sum, dst[at:at+k*MarkerInterval], dst[w:], uint16(base+uint32(at)-d.fpduPos))
			d.badMark = d.badMark || bad
			w += k * (MarkerInterval - MarkerSize)
			at += k * MarkerInterval
			continue
		}
		var m Marker
		if at+MarkerSize <= n {
			m = Marker(dst[at : at+MarkerSize])
		} else {
			m = d.mark[:]
			s.read(m, at)
		}
		d.sum = d.crcSum(m)
		if m.FPDUPTR() != uint16(base+uint32(at)-d.fpduPos) {
			d.badMark = true
		}
		at += MarkerSize
	}
	d.pos = base + uint32(n+over)
	d.left -= n
	if d.left == 0 {
		d.state, d.left = inTrailer, PadLen(d.ulen)+CRCSize
	}
	return nil
}

// untilMarkerAt returns the stream octets from stream position pos to the
// next Marker (0 when one starts there); huge with Markers off.
func (d *Deframer) untilMarkerAt(pos uint32) int {
	if !d.markers {
		return 1 << 30
	}
	return int((MarkerInterval - (pos-d.seqStart)%MarkerInterval) % MarkerInterval)
}

// streamView is the stream octets of a direct read: the destination, then
// the spill.
type streamView struct{ dst, spill []byte }

// read copies the octets at stream offset at into b.
func (s streamView) read(b []byte, at int) {
	for i := range b {
		if j := at + i; j < len(s.dst) {
			b[i] = s.dst[j]
		} else {
			b[i] = s.spill[j-len(s.dst)]
		}
	}
}

// crcSum returns the FPDU's running CRC extended over b, when CRCs are
// checked.
func (d *Deframer) crcSum(b []byte) uint32 {
	if !d.crc {
		return d.sum
	}
	return crcUpdate(d.sum, b)
}
