package iwarp

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// Receive buffering: headers and small payloads are staged; a payload
// remainder of at least directMin octets is read straight into its
// destination.
const (
	stagingSize = 64 << 10
	directMin   = 512
	// bigFPDU is the ULPDU size from which the receiver expects the next
	// FPDU to be large too, and so reads ahead only a little past a direct
	// read, instead of staging (and copying) a large part of its payload.
	bigFPDU = 8 << 10
	// bigRecent is how many FPDUs after a big one the receiver still
	// reads ahead only a little: a large tagged message is often followed
	// by a small FPDU or two (its short last segment, the Send that
	// answers for it) and then the next large one (a 64 KiB read's
	// data at queue depth 8). Reading the whole staging buffer after
	// those small FPDUs staged most of the next large payload, to be
	// copied again into place.
	bigRecent = 4
	// smallRead is that little: the FPDU's PAD and CRC, a Marker or two,
	// and the next FPDU's ULPDU_Length and DDP/RDMAP header (at most 46
	// octets, a Read Request's), with room to spare.
	smallRead = 256
)

// Transmit: emssInterval small batches pass between re-reads of
// TCP_MAXSEG; stageBytes is the staging buffer of a sender that inserts
// Markers: a batch's FPDUs are copied into it and written as one iovec (see
// mpa.Framer.UseStaging). It holds a full batch and the FPDU that may end
// it; a larger message is written a buffer at a time.
const (
	emssInterval = 64
	stageBytes   = batchBytes + mpa.MaxFPDUStreamLen
)

// errBatchFull is appendULPDU's word that the batch must be written before
// the segment fits.
var errBatchFull = errors.New("iwarp: transmit batch full")

// mpaLLP is MPA over TCP (RFC 5044, with the startup of RFC 6581) as the
// engine's lower layer: each DDP Segment is the ULPDU of one FPDU, with its
// CRC and, where negotiated, Markers.
type mpaLLP struct {
	s   *sock
	neg mpa.Negotiated
	rx  mpaRx
	_   [64]byte // the two goroutines' state on separate cache lines
	tx  mpaTx
}

// mpaRx is the receiver goroutine's part: a staging buffer the Deframer
// reads headers and small payloads from, and the iovecs of direct reads.
type mpaRx struct {
	d      *mpa.Deframer
	stage  []byte
	sb, se int // staged octets not yet given to the Deframer
	plan   [][]byte
	bufs   [][]byte
	ulen   int // the current FPDU's ULPDU_Length
	// sinceBig counts the FPDUs begun since the last of bigFPDU octets or
	// more.
	sinceBig int
	// staged counts the ULPDU octets taken from the staging buffer, that
	// is copied, not read straight into place (tests; atomic, as a test
	// reads it while the receiver runs).
	staged atomic.Int64
	// bad is the protocol error found in the current segment, reported at
	// the FPDU's end once its CRC is known to be good; until then the rest
	// of its ULPDU is dropped.
	bad     *protoError
	discard [4096]byte
}

// mpaTx is the sender goroutine's part: the Framer and the EMSS the FPDUs
// are aligned to.
type mpaTx struct {
	framer    *mpa.Framer
	fixedEMSS int // for tests; 0 reads TCP_MAXSEG
	emss      int
	mulpdu    int
	batches   int
	// wstart is the stream position where the write being framed starts
	// (the Framer's Pos when the last one ended). Every write ends with
	// MSG_EOR (sock.doWrite), so TCP starts a segment there and cuts the
	// write's octets into EMSS-sized segments from it: the stretches
	// FPDUs are fitted to count from wstart, not from the stream's start.
	wstart uint32
}

func newMPALLP(s *sock, neg mpa.Negotiated, emss int) *mpaLLP {
	m := &mpaLLP{s: s, neg: neg}
	m.rx = mpaRx{
		d:        mpa.NewDeframer(0, neg.RxMarkers, neg.CRC),
		stage:    make([]byte, stagingSize),
		plan:     make([][]byte, 0, 140),
		bufs:     make([][]byte, 0, 141),
		sinceBig: bigRecent, // no large FPDU yet
	}
	m.tx = mpaTx{framer: mpa.NewFramer(0, neg.TxMarkers, neg.CRC), fixedEMSS: emss}
	if neg.TxMarkers {
		m.tx.framer.UseStaging(make([]byte, stageBytes))
	}
	return m
}

// receive reads FPDUs until the stream ends (nil for a close between
// FPDUs) or an error, and hands their ULPDUs to r.
func (m *mpaLLP) receive(r *rx) error {
	x := &m.rx
	for {
		if x.sb == x.se {
			// Between FPDUs soon after a large one, read only what the
			// next header needs: its payload then goes straight into
			// place.
			buf := x.ahead()
			r.release(false)
			// Poll for the next message only between messages.
			n, err := m.s.readv(append(x.bufs[:0], buf), r.betweenMessages() && x.d.AtBoundary())
			if err != nil {
				return m.readErr(err)
			}
			x.sb, x.se = 0, n
		}
		ev, data, n, err := x.d.Next(x.stage[x.sb:x.se])
		x.sb += n
		switch ev {
		case mpa.ULPDUStart:
			x.began(x.d.ULPDULen())
			r.start(x.ulen)
		case mpa.ULPDUData:
			if x.bad != nil {
				continue // the rest of a bad segment
			}
			x.staged.Add(int64(len(data)))
			if err := r.data(data); err != nil {
				// With CRCs in use, the header that broke a rule has not
				// been verified yet: it may be a corrupted one. Drop the
				// rest of the ULPDU and report at the FPDU's end, where a
				// CRC error takes precedence (RFC 5044 4.4, 8).
				if pe, ok := err.(*protoError); ok && m.neg.CRC {
					x.bad = pe
					r.drop()
					continue
				}
				return err
			}
			if x.d.Remaining() >= directMin && x.sb == x.se {
				if dst := r.dest(); dst != nil {
					if err := m.direct(r, dst); err != nil {
						return err
					}
				}
			}
		case mpa.FPDUEnd:
			if err != nil {
				return &protoError{err: rdmap.FromMPA(uint8(mpa.CodeOf(err))), cause: err}
			}
			if x.bad != nil {
				return x.bad
			}
			if err := r.end(); err != nil {
				return err
			}
		}
	}
}

// readErr classifies the end of reading: nil for the peer's FIN between
// FPDUs (a graceful close), MPA error 1 otherwise.
func (m *mpaLLP) readErr(err error) error {
	if errors.Is(err, io.EOF) && m.rx.d.AtBoundary() {
		return nil
	}
	return fmt.Errorf("%w: %v", m.rx.d.EndOfStream(), err)
}

// direct reads the rest of the current payload piece straight from the
// socket into its destination dst, with the staging buffer after it for
// what follows.
func (m *mpaLLP) direct(r *rx, dst []byte) error {
	x := &m.rx
	target := dst[:min(len(dst), x.d.Remaining())]
	x.plan = x.d.PlanDirect(x.plan[:0], target)
	want := 0
	for _, p := range x.plan {
		want += len(p)
	}
	cur := x.plan
	staged := 0
	ahead := x.ahead()
	for want > 0 {
		r.release(false)
		x.bufs = append(append(x.bufs[:0], cur...), ahead)
		n, err := m.s.readv(x.bufs, false)
		if err != nil {
			return m.readErr(err)
		}
		if n >= want {
			staged, want = n-want, 0
			break
		}
		cur = advance(cur, n)
		want -= n
	}
	if err := x.d.CommitDirect(target); err != nil {
		return &protoError{err: rdmap.FromMPA(uint8(mpa.CodeOf(err))), cause: err}
	}
	x.sb, x.se = 0, staged
	return r.placedDirect(len(target))
}

// began notes the start of an FPDU of ulen octets.
func (x *mpaRx) began(ulen int) {
	x.ulen = ulen
	if ulen >= bigFPDU {
		x.sinceBig = 0
	} else if x.sinceBig < bigRecent {
		x.sinceBig++
	}
}

// ahead is where the receiver reads what follows the current FPDU: a
// little of the staging buffer when large FPDUs are coming, so that the
// next large payload goes straight into place; all of it otherwise, for a
// run of small FPDUs in one readv.
func (x *mpaRx) ahead() []byte {
	if x.sinceBig < bigRecent {
		return x.stage[:smallRead]
	}
	return x.stage
}

func (m *mpaLLP) verifiesFirst() bool { return false }

func (m *mpaLLP) discard() error {
	_, err := m.s.tc.Read(m.rx.discard[:])
	return err
}

// holdsFirstTx: RFC 5044 7.1.2 rule 4, the Responder sends nothing, not
// even a Marker, before it has received a valid FPDU.
func (m *mpaLLP) holdsFirstTx() bool { return m.neg.Role == mpa.Responder }

// startBatch resets the Framer and, now and then, re-reads the EMSS: TCP
// raises the MSS as the window opens (on loopback from 32 KiB to 64 KiB),
// so it is followed closely after bulk batches, rarely otherwise.
func (m *mpaLLP) startBatch(bulk bool) error {
	x := &m.tx
	if x.batches%emssInterval == 0 || bulk {
		if err := m.refreshEMSS(); err != nil {
			return err
		}
	}
	x.batches++
	x.framer.Reset()
	return nil
}

// refreshEMSS reads the EMSS and derives the MULPDU (RFC 5044 4.5).
func (m *mpaLLP) refreshEMSS() error {
	x := &m.tx
	emss := x.fixedEMSS
	if emss == 0 {
		var err error
		if emss, err = m.s.emss(); err != nil {
			return fmt.Errorf("iwarp: reading TCP_MAXSEG: %w", err)
		}
	}
	x.emss = max(emss, mpa.MinMULPDU+mpa.Overhead)
	x.mulpdu = mpa.MULPDU(x.emss, m.neg.TxMarkers)
	return nil
}

// maxULPDU returns the largest ULPDU of the next FPDU: one that ends the
// current EMSS-sized stretch of the write (counted from wstart), so that
// FPDUs stay aligned with TCP segments (RFC 5044 5.1, appendix A); or a
// full MULPDU when the room left is under the 128-octet floor of 4.5.
func (m *mpaLLP) maxULPDU() int {
	x := &m.tx
	room := x.emss - int((x.framer.Pos()-x.wstart)%uint32(x.emss))
	if u := x.framer.MaxULPDUIn(room); u >= mpa.MinMULPDU {
		return u
	}
	return x.mulpdu
}

// appendULPDU frames one FPDU; errBatchFull when a Markers sender's staging
// buffer must be written first.
func (m *mpaLLP) appendULPDU(iov [][]byte, hdr []byte, payload [][]byte) ([][]byte, error) {
	iov, err := m.tx.framer.AppendFPDUv(iov, hdr, payload)
	if err == mpa.ErrStagingFull {
		err = errBatchFull
	}
	return iov, err
}

func (m *mpaLLP) write(iov [][]byte) error {
	err := m.s.writev(iov)
	m.tx.framer.Reset()
	m.tx.wstart = m.tx.framer.Pos()
	return err
}

func (m *mpaLLP) postsDirect() bool { return true }

func (m *mpaLLP) tryWrite(iov [][]byte) ([][]byte, error) {
	rest, err := m.s.writeSome(iov)
	if err == nil && len(rest) > 0 {
		return rest, nil // the staging stays in use until write
	}
	m.tx.framer.Reset()
	m.tx.wstart = m.tx.framer.Pos()
	return nil, err
}

func (m *mpaLLP) setReadDeadline(t time.Time)  { m.s.setReadDeadline(t) }
func (m *mpaLLP) awaitAnswer()                 { m.s.awaitAnswer() }
func (m *mpaLLP) setWriteDeadline(t time.Time) { m.s.tc.SetWriteDeadline(t) }
func (m *mpaLLP) closeWrite() error            { return m.s.tc.CloseWrite() }

// close closes the socket; abortively with a reset, not a FIN: a peer with
// nothing in flight would take a FIN for a graceful close and keep a nil
// Err.
func (m *mpaLLP) close(abortive bool) {
	if abortive {
		m.s.tc.SetLinger(0)
	}
	m.s.tc.Close()
}
