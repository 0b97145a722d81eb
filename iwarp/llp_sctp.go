package iwarp

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// segSession is a DDP Stream Session that keeps DDP Segment boundaries: DDP
// over SCTP (RFC 5043, package iwarp/sctp, in the kernel or in userspace).
// It meets the LLP requirements of RFC 5041 section 3 itself: it reports
// its MULPDU, delivers each DDP Segment whole and in order (reordering by
// DDP-SSN), checks a strong digest (SCTP's CRC32c), and ends gracefully or
// abortively.
type segSession interface {
	// MULPDU is the largest DDP Segment WriteSegments takes now.
	MULPDU() int
	// NextSegment returns the next DDP Segment, valid until the next call;
	// io.EOF after the peer's graceful end.
	NextSegment() ([]byte, error)
	// WriteSegments sends DDP Segments: segment i is the concatenation of
	// bufs[ends[i-1]:ends[i]].
	WriteSegments(bufs [][]byte, ends []int) error
	// CloseWrite ends this direction gracefully after what was written.
	CloseWrite() error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	// Close releases the session gracefully; Abort at once, so that the
	// peer sees the stream lost.
	Close() error
	Abort() error
}

// segLLP is a segSession as the engine's lower layer. With it the engine
// skips MPA entirely (no FPDUs, Markers or CRCs) and shares everything
// above: DDP and RDMAP validation, placement, completions and Terminate
// handling.
type segLLP struct {
	s segSession
	// The sender's batch: the DDP headers (the sender reuses one header
	// buffer, so they are copied here) and where each segment ends.
	arena []byte
	ends  []int
}

const segArena = 64 << 10

func newSegLLP(s segSession) *segLLP { return &segLLP{s: s} }

// receive takes whole DDP Segments until the peer ends gracefully (nil) or
// an error. The session has already checked each one's digest.
func (l *segLLP) receive(r *rx) error {
	for {
		r.release(false)
		seg, err := l.s.NextSegment()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: %v", mpa.ErrLLPLost, err)
		}
		r.start(len(seg))
		if err := r.data(seg); err != nil {
			return err
		}
		if err := r.end(); err != nil {
			return err
		}
	}
}

func (l *segLLP) verifiesFirst() bool { return true }

func (l *segLLP) discard() error {
	_, err := l.s.NextSegment()
	return err
}

func (l *segLLP) holdsFirstTx() bool         { return false }
func (l *segLLP) startBatch(bulk bool) error { return nil }
func (l *segLLP) maxULPDU() int              { return l.s.MULPDU() }

// appendULPDU adds one DDP Segment, a segment of its own.
func (l *segLLP) appendULPDU(iov [][]byte, hdr []byte, payload [][]byte) ([][]byte, error) {
	if cap(l.arena)-len(l.arena) < len(hdr) {
		l.arena = make([]byte, 0, max(segArena, len(hdr))) // the old one stays with the iovecs that use it
	}
	off := len(l.arena)
	l.arena = append(l.arena, hdr...)
	iov = append(iov, l.arena[off:len(l.arena):len(l.arena)])
	iov = append(iov, payload...)
	l.ends = append(l.ends, len(iov))
	return iov, nil
}

func (l *segLLP) write(iov [][]byte) error {
	err := l.s.WriteSegments(iov, l.ends)
	l.ends, l.arena = l.ends[:0], l.arena[:0]
	return err
}

// postsDirect: no. A session's write may wait for the association's
// window, which a poster must not.
func (l *segLLP) postsDirect() bool { return false }

func (l *segLLP) tryWrite(iov [][]byte) ([][]byte, error) { return nil, l.write(iov) }

func (l *segLLP) setReadDeadline(t time.Time) { l.s.SetReadDeadline(t) }

// awaitAnswer: the SCTP receiver does not spin.
func (l *segLLP) awaitAnswer()                 {}
func (l *segLLP) setWriteDeadline(t time.Time) { l.s.SetWriteDeadline(t) }
func (l *segLLP) closeWrite() error            { return l.s.CloseWrite() }

func (l *segLLP) close(abortive bool) {
	if abortive {
		l.s.Abort()
		return
	}
	l.s.CloseWrite()
	l.s.Close()
}
