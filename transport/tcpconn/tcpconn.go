// Package tcpconn is what the iSCSI-over-TCP transports of the target and
// the initiator share (as iserconn is for iSER): a Writer that gathers PDUs
// with their padding and CRC32C digests into one writev, and a Reader that
// takes a stream apart into BHS, data segment, padding and digests (RFC
// 7143 sections 11.1 and 13.1). Where a data segment goes (a receive
// buffer, the staging region, the caller's buffer) is the caller's choice:
// Reader.Header returns the BHS, Reader.Data reads the segment into any
// slice.
package tcpconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/spin"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"golang.org/x/sys/unix"
)

// Digests says which digests are in force; both ends of a connection
// switch them on together when the login ends (section 13.1).
type Digests struct {
	Header, Data atomic.Bool
}

// Writer gathers PDUs for one writev. It is not safe for concurrent use.
type Writer struct {
	Conn    net.Conn
	Digests *Digests
	// Writing is true while Flush writes (see Reader.Writing).
	Writing atomic.Bool
	// Turn times the peer's answers to what Flush wrote (see Reader.Turn).
	Turn spin.Turnaround

	iov   net.Buffers
	iovs  [][]byte
	arena []byte // BHSs built in place and digests of the batch
	zero  [4]byte
}

// ErrArena is returned by Header when Begin did not make room.
var ErrArena = errors.New("tcpconn: no room for another header: call Begin with more")

// Begin starts a batch of at most k PDUs whose headers Header builds.
func (w *Writer) Begin(k int) {
	if need := (k + 1) * (iscsi.BHSLen + 2*iscsi.DigestLen); cap(w.arena) < need {
		w.arena = make([]byte, 0, need)
	}
	w.arena, w.iovs = w.arena[:0], w.iovs[:0]
}

// Room reports whether the batch has room for k more PDUs: their headers
// (Header) and digests.
func (w *Writer) Room(k int) bool {
	return cap(w.arena)-len(w.arena) >= k*(iscsi.BHSLen+2*iscsi.DigestLen)
}

// Len is the number of iovecs the batch holds: 0 when it is empty.
func (w *Writer) Len() int { return len(w.iovs) }

// Header returns a zeroed BHS for a PDU of the batch, to fill and Append.
func (w *Writer) Header() []byte {
	n := len(w.arena)
	w.arena = w.arena[:n+iscsi.BHSLen]
	h := w.arena[n : n+iscsi.BHSLen : n+iscsi.BHSLen]
	clear(h)
	return h
}

// Append adds a PDU: its BHS, whose DataSegmentLength says how much of
// data is its data segment, padding to a multiple of 4, and the digests in
// force.
func (w *Writer) Append(bhs iscsi.BHS, data []byte) {
	w.iovs = append(w.iovs, bhs[:iscsi.BHSLen])
	if w.Digests.Header.Load() {
		w.iovs = append(w.iovs, w.digest(iscsi.Digest(bhs[:iscsi.BHSLen])))
	}
	dsl := int(bhs.DataSegmentLength())
	if dsl == 0 {
		return
	}
	data = data[:dsl]
	pad := bhs.PaddedDataLength() - dsl
	w.iovs = append(w.iovs, data)
	if pad > 0 {
		w.iovs = append(w.iovs, w.zero[:pad])
	}
	if w.Digests.Data.Load() {
		w.iovs = append(w.iovs, w.digest(iscsi.DigestUpdate(iscsi.Digest(data), w.zero[:pad])))
	}
}

func (w *Writer) digest(sum uint32) []byte {
	n := len(w.arena)
	w.arena = w.arena[:n+iscsi.DigestLen]
	d := w.arena[n : n+iscsi.DigestLen]
	iscsi.PutDigest(d, sum)
	return d
}

// Flush writes the batch with writev. Writing is true meanwhile (a
// Reader's spin stops for it).
func (w *Writer) Flush() error {
	w.iov = w.iovs
	w.Writing.Store(true)
	_, err := w.iov.WriteTo(w.Conn)
	w.Writing.Store(false)
	w.Turn.Wrote()
	return err
}

// readAhead is a Reader's buffer: the stream is read into it as far as
// it has come, up to this much, so that the small PDUs a peer wrote
// together (a batch of commands or answers) take one read, not two or
// three each.
const readAhead = 32 << 10

// Reader takes PDUs off the stream, reading ahead into a buffer of its own
// what has come of small ones; a data segment of half the buffer or more
// is read straight into the caller's slice, and so is what follows it up
// to the next BHS. It is not safe for concurrent use.
type Reader struct {
	Conn    net.Conn
	Digests *Digests
	// Max is the longest data segment accepted (the MaxRecvDataSegmentLength
	// this end declared).
	Max int
	// Spin, when positive, is how long Header polls a quiet connection for
	// the next PDU before it sleeps until the poller wakes it: a sleep and
	// its wake-up cost a small I/O more than the network does, most of all
	// in a virtual machine (iwarp.ConnConfig.ReadSpin, the same for iSER).
	// Writing, when set, is the connection's Writer's: while it is in a
	// write, which may be waiting for the poller that a spinning reader
	// keeps from running, the spin stops. Turn, when set, is the Writer's
	// measure of the peer's answers: the spin then lasts from the last
	// write, for longer when the peer answers more slowly than Spin, within
	// a bound (spin.Turnaround).
	Spin    time.Duration
	Writing *atomic.Bool
	Turn    *spin.Turnaround
	// AwaitedOnly limits the spin to an answer the caller awaits
	// (AwaitAnswer), as iwarp.ConnConfig.ReadSpinAwaitedOnly does for iSER.
	AwaitedOnly bool

	// aw tracks an awaited answer (AwaitAnswer, spin.Awaited); src is
	// Conn, read so that aw's kick fails no read.
	aw  spin.Awaited
	src io.Reader

	rc     syscall.RawConn // Conn's, for the spin; nil until the first
	try    func() (bool, error)
	noTurn spin.Turnaround // Turn when none is set
	pbuf   []byte
	pn     int
	perr   error
	spun   int // headers begun by the spin (tests)

	hdr  [iscsi.BHSLen + iscsi.DigestLen]byte
	tail [3 + iscsi.DigestLen]byte
	dsl  int

	// rb[rs:re] is what was read ahead and not yet taken. bulk: the last
	// data segment was long; reads stop where what is asked for ends,
	// rather than read the next octets into rb to be copied.
	rb     []byte
	rs, re int
	bulk   bool
}

// Header reads the next PDU's BHS (and header digest), checks it, and
// returns it; valid until the next call. The data segment, of
// DataSegmentLength octets, must be read next with Data.
func (r *Reader) Header() (iscsi.BHS, error) {
	if r.src == nil {
		r.src = kickTolerant{r}
		r.rb = make([]byte, readAhead)
	}
	if r.rs == r.re {
		// Nothing read ahead: the next PDU is yet to come, and this is
		// where to wait for it.
		r.rs, r.re = 0, 0
		got := 0
		switch {
		case r.Spin > 0 && r.AwaitedOnly:
			var err error
			if got, err = r.waitAwaited(r.window(iscsi.BHSLen)); err != nil {
				return nil, err
			}
		case r.Spin > 0:
			if got = r.spin(r.window(iscsi.BHSLen)); got > 0 {
				r.spun++
			}
		}
		r.re = got
		if err := r.fill(iscsi.BHSLen); err != nil {
			return nil, err
		}
		if got == 0 && r.Spin > 0 && r.Turn != nil {
			r.Turn.Arrived(spin.Now(), r.Spin)
		}
	} else if err := r.fill(iscsi.BHSLen); err != nil {
		return nil, err
	}
	r.take(r.hdr[:iscsi.BHSLen])
	bhs := iscsi.BHS(r.hdr[:iscsi.BHSLen])
	// Digests start with the Full Feature Phase: the flag is read after the
	// BHS, which the peer can only send once it is in force.
	if r.Digests.Header.Load() {
		if err := r.fill(iscsi.DigestLen); err != nil {
			return nil, noEOF(err)
		}
		r.take(r.hdr[iscsi.BHSLen:])
		if iscsi.Digest(bhs) != iscsi.GetDigest(r.hdr[iscsi.BHSLen:]) {
			return nil, fmt.Errorf("header digest error (%v)", bhs.Opcode())
		}
	}
	if _, err := iscsi.Parse(bhs); err != nil {
		return nil, err
	}
	if n := bhs.TotalAHSLength(); n != 0 {
		return nil, fmt.Errorf("%v with %d words of AHS", bhs.Opcode(), n)
	}
	r.dsl = int(bhs.DataSegmentLength())
	if r.dsl > r.Max {
		return nil, fmt.Errorf("%v with a data segment of %d octets, more than the %d declared", bhs.Opcode(), r.dsl, r.Max)
	}
	if r.dsl > 0 {
		// A PDU without data (the SCSI Response after a long Data-In)
		// keeps the mode: the next is likely long again.
		r.bulk = r.dsl >= len(r.rb)/2
	}
	return bhs, nil
}

// window is where the next read goes: the rest of the buffer, or with
// bulk only the n octets wanted.
func (r *Reader) window(n int) []byte {
	if r.bulk {
		return r.rb[r.re : r.rs+n]
	}
	return r.rb[r.re:]
}

// fill reads until n octets (at most half the buffer) are read ahead, as
// io.ReadFull: io.EOF when the stream ends before any of them,
// io.ErrUnexpectedEOF part way.
func (r *Reader) fill(n int) error {
	if r.re-r.rs >= n {
		return nil
	}
	if r.rs > 0 {
		r.re = copy(r.rb, r.rb[r.rs:r.re])
		r.rs = 0
	}
	for r.re < n {
		k, err := r.src.Read(r.window(n))
		r.re += k
		if err != nil && r.re < n {
			if err == io.EOF && r.re > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// take moves len(b) octets read ahead into b.
func (r *Reader) take(b []byte) { r.rs += copy(b, r.rb[r.rs:r.re]) }

// AwaitAnswer says that the caller will wait for the answer to what it
// writes next, with nothing else to do meanwhile: with AwaitedOnly,
// Header then spins for it, and one already asleep in its read is woken
// to spin (spin.Awaited). Safe to call from any goroutine; call it before
// the write (a quick answer could come before it returns).
func (r *Reader) AwaitAnswer() {
	if r.AwaitedOnly && r.Spin > 0 {
		r.aw.Await(r.Conn)
	}
}

// kickTolerant reads the Reader's Conn, reading again when a kick's
// deadline failed the read (spin.Awaited.Retry).
type kickTolerant struct{ r *Reader }

func (k kickTolerant) Read(b []byte) (int, error) {
	for {
		n, err := k.r.Conn.Read(b)
		if err != nil && n == 0 && k.r.aw.Retry(k.r.Conn) {
			continue
		}
		return n, err
	}
}

// waitAwaited reads the first octets of the next PDU into b with
// AwaitedOnly, spinning instead of blocking for an awaited answer
// (spin.Awaited.Wait), and returns how many octets it read.
func (r *Reader) waitAwaited(b []byte) (int, error) {
	var n int
	poll := func() (bool, error) {
		n = r.spin(b)
		return n > 0, nil
	}
	block := func() error {
		var err error
		n, err = r.Conn.Read(b)
		if n > 0 {
			return nil
		}
		return err
	}
	polled, caught, err := r.aw.Wait(r.Conn, poll, block)
	if err != nil {
		return 0, err
	}
	if caught {
		r.spun++
	}
	if !polled && r.Turn != nil {
		r.Turn.Arrived(spin.Now(), r.Spin)
	}
	return n, nil
}

// spin polls for up to Spin for octets of the next PDU, reading them into
// b, and returns how many it read: 0 when none came (or the stream ended,
// or failed: the blocking read that follows reports that).
func (r *Reader) spin(b []byte) int {
	if r.rc == nil {
		sc, ok := r.Conn.(syscall.Conn)
		if !ok {
			r.Spin = 0
			return 0
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			r.Spin = 0
			return 0
		}
		r.rc = rc
		poll := func(fd uintptr) bool {
			// One try: the socket is non-blocking, and true ends RawRead
			// without waiting for the poller.
			r.pn, r.perr = unix.Read(int(fd), r.pbuf)
			return true
		}
		r.try = func() (bool, error) {
			if err := rc.Read(poll); err != nil {
				return false, err
			}
			return r.perr != unix.EAGAIN, nil
		}
	}
	r.pbuf = b
	turn := r.Turn
	if turn == nil {
		// No writer's measure: a fresh one spins the base from the
		// first try, and keeps no samples (nothing was written).
		turn = &r.noTurn
	}
	if got, err := turn.Poll(r.Spin, r.try, r.Writing); err != nil || !got {
		return 0
	}
	if r.perr != nil || r.pn <= 0 {
		return 0 // the end, or an error: the blocking read says which
	}
	return r.pn
}

// noEOF is err, an end of the stream inside a PDU being unexpected.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Data reads the data segment of the PDU Header returned into dst (its
// length, DataSegmentLength), then its padding and data digest, and checks
// the digest.
func (r *Reader) Data(dst []byte) error {
	if len(dst) != r.dsl {
		return fmt.Errorf("tcpconn: data segment of %d octets read into %d", r.dsl, len(dst))
	}
	if r.dsl == 0 {
		return nil
	}
	pad := (4 - r.dsl%4) % 4
	tl := pad
	dd := r.Digests.Data.Load()
	if dd {
		tl += iscsi.DigestLen
	}
	k := copy(dst, r.rb[r.rs:r.re])
	r.rs += k
	if rest := dst[k:]; len(rest) >= len(r.rb)/2 {
		if _, err := io.ReadFull(r.src, rest); err != nil {
			return noEOF(err)
		}
	} else if len(rest) > 0 {
		if err := r.fill(len(rest)); err != nil {
			return noEOF(err)
		}
		r.take(rest)
	}
	if err := r.fill(tl); err != nil {
		return noEOF(err)
	}
	r.take(r.tail[:tl])
	if dd && iscsi.DigestUpdate(iscsi.Digest(dst), r.tail[:pad]) != iscsi.GetDigest(r.tail[pad:tl]) {
		return errors.New("data digest error")
	}
	return nil
}
