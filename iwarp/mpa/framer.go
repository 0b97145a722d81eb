package mpa

import (
	"errors"
	"unsafe"
)

// ErrULPDUTooLong is returned by the Framer for a ULPDU that the 16-bit
// ULPDU_Length field cannot express.
var ErrULPDUTooLong = errors.New("mpa: ULPDU longer than 65535 octets")

// ErrStagingFull is returned by a staging Framer (UseStaging) for an FPDU
// that does not fit what is left of its staging buffer: write what was
// framed, Reset, and frame it again.
var ErrStagingFull = errors.New("mpa: FPDU does not fit the rest of the staging buffer")

// MaxFPDUStreamLen is the most stream octets one FPDU can occupy: a ULPDU of
// MaxULPDU octets with PAD and CRC, led by a Marker and with one more every
// 508 octets after it (see FPDUStreamLen).
const MaxFPDUStreamLen = MarkerSize + maxFPDULen + MarkerSize*((maxFPDULen-1)/(MarkerInterval-MarkerSize))

// maxFPDULen is FPDULen(MaxULPDU).
const maxFPDULen = (LengthSize+MaxULPDU+3)&^3 + CRCSize

// arenaChunk is the size of each small-buffer chunk the Framer writes
// ULPDU_Length fields, headers, Markers, PAD and CRCs into.
const arenaChunk = 16 << 10

// Framer is the transmit half of MPA Full Operation (RFC 5044 sections 4.1
// to 4.4). It turns ULPDUs into FPDUs as a list of iovecs ready for one
// writev: payload slices point into the caller's buffers, never copied, and
// the FPDU's own octets (ULPDU_Length, the ULPDU's header, Markers, PAD, CRC)
// come from small buffers the Framer reuses, so steady-state framing
// allocates nothing.
//
// The Framer follows the stream position from the start of Full Operation
// (SeqStart) so that it can insert a Marker at every 512th octet of the
// stream when Markers are in use. Every iovec it returns must therefore be
// written, in order, before iovecs framed later; and the buffers behind them
// stay valid until Reset.
type Framer struct {
	markers  bool
	crc      bool
	seqStart uint32 // stream position of the first octet of Full Operation
	pos      uint32 // stream position of the next octet to be framed

	chunks [][]byte // small-buffer arena; chunks are kept across Reset
	cur    int      // index of the chunk being filled
	used   int      // octets used in chunks[cur]
	tail   int      // start in chunks[cur] of the last iovec, or -1 when it is not arena-backed

	stage     []byte // with UseStaging: every framed octet, in stream order
	staged    int    // octets of stage used since Reset
	stageTail int    // start in stage of the last iovec, or -1 when there is none
	// The running CRC of the FPDU being staged, over stage[:summed] from
	// its start, and the Markers of a run of whole intervals staged in one
	// pass (stageOctets).
	stageSum uint32
	summed   int
	// alignStage: the buffer starts on a cache line and has room to keep
	// octets aligned to their stream position (stageStart).
	alignStage bool
}

// NewFramer returns a Framer for a half connection whose first Full
// Operation octet is at stream position seqStart (use 0 unless testing
// wrap-around). markers says whether the peer asked for Markers; crc whether
// CRCs are in use (when not, the CRC field is sent as zero).
func NewFramer(seqStart uint32, markers, crc bool) *Framer {
	return &Framer{markers: markers, crc: crc, seqStart: seqStart, pos: seqStart, tail: -1}
}

// Pos returns the stream position of the next octet to be framed.
func (f *Framer) Pos() uint32 { return f.pos }

// Reset makes the Framer's small buffers reusable. Call it once everything
// framed so far has been written.
func (f *Framer) Reset() {
	f.cur, f.used, f.tail = 0, 0, -1
	f.staged, f.stageTail = f.stageStart(), -1
}

// stageAlign is the cache line: with room for it, a staging Framer places
// each stream octet at an address congruent to its stream position modulo
// stageAlign, so that Marker intervals, which start at multiples of 512,
// start on cache lines and crcSpread stores whole lines.
const stageAlign = 64

// stageStart returns where in the staging buffer the next octet goes after
// a Reset.
func (f *Framer) stageStart() int {
	if !f.alignStage {
		return 0
	}
	return int(f.pos-f.seqStart) & (stageAlign - 1)
}

// UseStaging makes the Framer copy each FPDU whole (ULPDU_Length, ULPDU,
// Markers, PAD, CRC) into buf, in stream order, instead of referencing the
// payload: consecutive FPDUs then form one iovec, and with CRCs on, whole
// Marker intervals are copied and summed in one pass. With Markers this is
// cheaper than zero-copy framing, whose two iovecs per 512-octet Marker
// interval cost writev more than the copy does. buf must hold at least
// MaxFPDUStreamLen octets (2*64 more let it keep octets on cache lines by
// stream position); an FPDU that does not fit the rest of it fails with
// ErrStagingFull.
func (f *Framer) UseStaging(buf []byte) {
	if len(buf) < MaxFPDUStreamLen {
		panic("mpa: staging buffer shorter than MaxFPDUStreamLen")
	}
	f.alignStage = false
	if len(buf) >= MaxFPDUStreamLen+2*stageAlign {
		buf = buf[-uintptr(unsafe.Pointer(unsafe.SliceData(buf)))&(stageAlign-1):]
		f.alignStage = true
	}
	f.stage, f.staged, f.stageTail = buf, f.stageStart(), -1
}

// alloc returns n octets of arena, from the current chunk when they fit so
// that adjacent small pieces can share one iovec.
func (f *Framer) alloc(n int) []byte {
	if len(f.chunks) == 0 {
		f.chunks = append(f.chunks, make([]byte, arenaChunk))
	}
	if f.used+n > len(f.chunks[f.cur]) {
		f.cur++
		f.used = 0
		f.tail = -1
		if f.cur == len(f.chunks) {
			f.chunks = append(f.chunks, make([]byte, arenaChunk))
		}
	}
	start := f.used
	f.used += n
	return f.chunks[f.cur][start:f.used:f.used]
}

// appendSmall appends n arena octets to iov, merging them into the last
// iovec when that one ends right where they start, and returns the octets.
func (f *Framer) appendSmall(iov [][]byte, n int) ([][]byte, []byte) {
	b := f.alloc(n)
	if f.tail >= 0 && len(iov) > 0 {
		last := iov[len(iov)-1]
		if len(last) > 0 && unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), len(last)) == unsafe.Pointer(unsafe.SliceData(b)) {
			iov[len(iov)-1] = f.chunks[f.cur][f.tail:f.used:f.used]
			return iov, b
		}
	}
	f.tail = f.used - n
	return append(iov, b), b
}

// untilMarker returns the number of stream octets from the current position
// to the next Marker (0 when a Marker is due right here); with Markers off it
// returns a number larger than any FPDU.
func (f *Framer) untilMarker() int {
	if !f.markers {
		return 1 << 30
	}
	off := (f.pos - f.seqStart) % MarkerInterval
	if off == 0 {
		return 0
	}
	return int(MarkerInterval - off)
}

// FPDUStreamLen returns the stream octets an FPDU carrying ulen ULPDU octets
// would occupy if framed next: the FPDU itself plus every Marker in it,
// including one that falls just before its ULPDU_Length field.
func (f *Framer) FPDUStreamLen(ulen int) int {
	n := FPDULen(ulen)
	if !f.markers {
		return n
	}
	// A Marker due at the FPDU's start belongs to it; each further Marker
	// lies at a 512-octet stream boundary strictly inside the FPDU (Markers
	// and FPDUs are 4-aligned, so one can never straddle the end).
	first := f.untilMarker()
	if first == 0 {
		return MarkerSize + n + MarkerSize*((n-1)/(MarkerInterval-MarkerSize))
	}
	if n <= first {
		return n
	}
	// After the first inner Marker at stream offset first, one every 508
	// FPDU octets.
	rest := n - first
	return n + MarkerSize*(1+(rest-1)/(MarkerInterval-MarkerSize))
}

// MaxULPDUIn returns the largest ULPDU length whose FPDU, framed next, fits in
// room stream octets (Markers included), or -1 when not even an empty one
// does. A transmitter uses it to size the FPDUs of a batch so that TCP
// segments start on FPDU boundaries (RFC 5044 section 5.1, appendix A).
func (f *Framer) MaxULPDUIn(room int) int {
	if !f.markers { // FPDULen(u) = (u+2 rounded up to 4) + 4 <= room
		return max(-1, min(MaxULPDU, (room-CRCSize)&^3-LengthSize))
	}
	lo, hi := -1, min(room, MaxULPDU)
	for lo < hi { // largest ulen in [0, hi] with FPDUStreamLen(ulen) <= room
		mid := lo + (hi-lo+1)/2
		if f.FPDUStreamLen(mid) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// AppendFPDU frames one FPDU whose ULPDU is hdr followed by payload, and
// appends its iovecs to iov. hdr (a DDP/RDMAP header, a few dozen octets) is
// copied into the Framer's buffers so that it shares an iovec with the
// ULPDU_Length field; payload is referenced, never copied, and must not
// change until the iovecs are written. The CRC covers exactly the octets
// RFC 5044 section 4.4 lists, Markers included.
func (f *Framer) AppendFPDU(iov [][]byte, hdr, payload []byte) ([][]byte, error) {
	p := [1][]byte{payload}
	return f.AppendFPDUv(iov, hdr, p[:])
}

// AppendFPDUv is AppendFPDU with the payload gathered from several slices
// (a DDP Segment that spans the end of one buffer and the start of the
// next). payload itself is not retained.
func (f *Framer) AppendFPDUv(iov [][]byte, hdr []byte, payload [][]byte) ([][]byte, error) {
	ulen := len(hdr)
	for _, p := range payload {
		ulen += len(p)
	}
	if ulen > MaxULPDU {
		return iov, ErrULPDUTooLong
	}
	if f.stage != nil {
		return f.stageFPDU(iov, ulen, hdr, payload)
	}
	fpduStart := f.pos
	var sum uint32
	// A Marker due right here falls between FPDUs: FPDUPTR 0, and it is
	// covered by this FPDU's CRC (4.4 rule 2).
	if f.untilMarker() == 0 {
		var m []byte
		iov, m = f.appendSmall(iov, MarkerSize)
		putMarker(m, 0)
		sum = f.sum(sum, m)
		f.pos += MarkerSize
		fpduStart = f.pos
	}
	// ULPDU_Length and the header are copied together. A Marker cannot fall
	// inside ULPDU_Length (FPDUs start 4-aligned), but may fall in hdr.
	var lh []byte
	gap := f.untilMarker() // > 0 here; with Markers off it is huge
	first := min(len(hdr), gap-LengthSize)
	iov, lh = f.appendSmall(iov, LengthSize+first)
	lh[0], lh[1] = byte(ulen>>8), byte(ulen)
	copy(lh[LengthSize:], hdr[:first])
	sum = f.sum(sum, lh)
	f.pos += uint32(len(lh))
	iov, sum = f.appendBody(iov, sum, fpduStart, hdr[first:], true)
	for _, p := range payload {
		iov, sum = f.appendBody(iov, sum, fpduStart, p, false)
	}
	// PAD, then any Marker that lands right after it (covered by this CRC,
	// 4.4 rule 1), then the CRC itself. No Marker can fall inside the PAD:
	// it starts off a 4-octet boundary and ends on one.
	if pad := PadLen(ulen); pad > 0 {
		var p []byte
		iov, p = f.appendSmall(iov, pad)
		clear(p)
		sum = f.sum(sum, p)
		f.pos += uint32(pad)
	}
	if f.untilMarker() == 0 {
		iov, sum = f.appendMarker(iov, sum, fpduStart)
	}
	var c []byte
	iov, c = f.appendSmall(iov, CRCSize)
	if f.crc {
		putCRC(c, sum)
	} else {
		clear(c)
	}
	f.pos += CRCSize
	return iov, nil
}

// appendBody appends ULPDU octets b, splitting them around the Markers that
// fall inside. Header octets (small) are copied into the arena; payload
// octets are referenced in place.
func (f *Framer) appendBody(iov [][]byte, sum, fpduStart uint32, b []byte, small bool) ([][]byte, uint32) {
	for len(b) > 0 {
		gap := f.untilMarker()
		if gap == 0 {
			iov, sum = f.appendMarker(iov, sum, fpduStart)
			continue
		}
		n := min(len(b), gap)
		if small {
			var s []byte
			iov, s = f.appendSmall(iov, n)
			copy(s, b[:n])
		} else {
			iov = append(iov, b[:n:n])
			f.tail = -1
		}
		sum = f.sum(sum, b[:n])
		f.pos += uint32(n)
		b = b[n:]
	}
	return iov, sum
}

// appendMarker appends a Marker pointing back to the FPDU that starts at
// stream position fpduStart (4.3).
func (f *Framer) appendMarker(iov [][]byte, sum, fpduStart uint32) ([][]byte, uint32) {
	var m []byte
	iov, m = f.appendSmall(iov, MarkerSize)
	putMarker(m, uint16(f.pos-fpduStart))
	sum = f.sum(sum, m)
	f.pos += MarkerSize
	return iov, sum
}

// sum extends the FPDU's running CRC over b, when CRCs are in use.
func (f *Framer) sum(sum uint32, b []byte) uint32 {
	if !f.crc {
		return sum
	}
	return crcUpdate(sum, b)
}

// stageFPDU is AppendFPDUv for a staging Framer: it writes the FPDU's stream
// octets into the staging buffer and appends them to iov, as part of the
// last iovec when that one ends where they start.
func (f *Framer) stageFPDU(iov [][]byte, ulen int, hdr []byte, payload [][]byte) ([][]byte, error) {
	n := f.FPDUStreamLen(ulen)
	if n > len(f.stage)-f.staged {
		return iov, ErrStagingFull
	}
	start := f.staged
	f.stageSum, f.summed = 0, start
	// A Marker due right here falls between FPDUs (FPDUPTR 0) and belongs
	// to this FPDU, so the FPDU's stream octets start with it.
	if f.untilMarker() == 0 {
		putMarker(f.stage[f.staged:], 0)
		f.staged += MarkerSize
		f.pos += MarkerSize
	}
	fpduStart := f.pos
	var l [LengthSize]byte
	l[0], l[1] = byte(ulen>>8), byte(ulen)
	f.stageOctets(l[:], fpduStart)
	f.stageOctets(hdr, fpduStart)
	for _, p := range payload {
		f.stageOctets(p, fpduStart)
	}
	var pad [3]byte
	f.stageOctets(pad[:PadLen(ulen)], fpduStart)
	// A Marker right after the PAD is inside the FPDU (4.4 rule 1).
	if f.untilMarker() == 0 {
		putMarker(f.stage[f.staged:], uint16(f.pos-fpduStart))
		f.staged += MarkerSize
		f.pos += MarkerSize
	}
	// The CRC covers every staged octet of the FPDU before the CRC field:
	// a leading Marker (4.4 rule 2), ULPDU_Length, ULPDU, inner Markers, PAD
	// and a Marker after the PAD (rule 1).
	c := f.stage[f.staged : f.staged+CRCSize]
	if f.crc {
		putCRC(c, crcUpdate(f.stageSum, f.stage[f.summed:f.staged]))
	} else {
		clear(c)
	}
	f.staged += CRCSize
	f.pos += CRCSize
	if f.stageTail >= 0 && len(iov) > 0 && f.stageTail+len(iov[len(iov)-1]) == start &&
		unsafe.SliceData(iov[len(iov)-1]) == &f.stage[f.stageTail] {
		iov[len(iov)-1] = f.stage[f.stageTail:f.staged:f.staged]
		return iov, nil
	}
	f.stageTail = start
	return append(iov, f.stage[start:f.staged:f.staged]), nil
}

// stageOctets copies b into the staging buffer at the stream position,
// inserting a Marker that points back to fpduStart at every 512-octet
// boundary it crosses. With CRCs on, whole Marker intervals are copied and
// summed in one pass (crcSpread).
func (f *Framer) stageOctets(b []byte, fpduStart uint32) {
	const piece = MarkerInterval - MarkerSize
	for len(b) > 0 {
		gap := f.untilMarker()
		if k := len(b) / piece; gap == 0 && k > 0 && f.crc {
			f.stageSum = crcUpdate(f.stageSum, f.stage[f.summed:f.staged])
			f.stageSum = crcSpread(f.stageSum, b[:k*piece], uint16(f.pos-fpduStart), f.stage[f.staged:])
			f.staged += k * MarkerInterval
			f.summed = f.staged
			f.pos += uint32(k * MarkerInterval)
			b = b[k*piece:]
			continue
		}
		if gap == 0 {
			putMarker(f.stage[f.staged:], uint16(f.pos-fpduStart))
			f.staged += MarkerSize
			f.pos += MarkerSize
			gap = MarkerInterval - MarkerSize
		}
		k := copy(f.stage[f.staged:], b[:min(len(b), gap)])
		f.staged += k
		f.pos += uint32(k)
		b = b[k:]
	}
}
