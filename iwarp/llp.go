package iwarp

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// segLLP is a lower layer that keeps DDP Segment boundaries: DDP over SCTP
// (RFC 5043, package iwarp/sctp). It meets the LLP requirements of RFC 5041
// section 3 itself: it reports its MULPDU, delivers each DDP Segment whole
// and in order (reordering by DDP-SSN), checks a strong digest (SCTP's
// CRC32c), and ends gracefully or abortively. With it the engine's sender
// and receiver skip MPA entirely (no FPDUs, Markers or CRCs) and share
// everything above: DDP and RDMAP validation, placement, completions and
// Terminate handling.
//
// The MPA/TCP path (sock) is the other lower layer; a conn has one or the
// other (conn.seg nil: MPA/TCP).
type segLLP interface {
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
	// Close releases the LLP gracefully; Abort at once, so that the peer
	// sees the stream lost.
	Close() error
	Abort() error
}

// receive runs the receiver over the conn's lower layer.
func (r *rx) receive() error {
	if r.c.seg == nil {
		return r.run()
	}
	return r.runSegments()
}

// runSegments receives whole DDP Segments from a segLLP until the peer
// ends gracefully (nil) or an error. Each segment goes through the same
// header collection, validation and placement as an MPA ULPDU; the LLP has
// already checked its digest.
func (r *rx) runSegments() error {
	for {
		seg, err := r.c.seg.NextSegment()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: %v", mpa.ErrLLPLost, err)
		}
		r.ulen, r.hdrN, r.need, r.placed, r.dst = len(seg), 0, 1, 0, nil
		if err := r.data(seg); err != nil {
			return err
		}
		if err := r.endSegment(); err != nil {
			return err
		}
	}
}

// txSeg is the sender's state for a segLLP: the DDP headers of a batch
// (the sender reuses one header buffer) and where each segment ends.
type txSeg struct {
	arena []byte
	ends  []int
}

const segArena = 64 << 10

// appendULPDU adds one DDP Segment, hdr then payload, to the batch: as an
// FPDU over MPA (mpa.ErrStagingFull when a Markers sender's staging buffer
// must be written first), as a segment of its own over a segLLP.
func (t *tx) appendULPDU(hdr []byte, payload [][]byte) error {
	if t.c.seg == nil {
		var err error
		t.iov, err = t.framer.AppendFPDUv(t.iov, hdr, payload)
		return err
	}
	s := &t.seg
	if cap(s.arena)-len(s.arena) < len(hdr) {
		s.arena = make([]byte, 0, max(segArena, len(hdr))) // the old one stays with the iovecs that use it
	}
	off := len(s.arena)
	s.arena = append(s.arena, hdr...)
	t.iov = append(t.iov, s.arena[off:len(s.arena):len(s.arena)])
	t.iov = append(t.iov, payload...)
	s.ends = append(s.ends, len(t.iov))
	return nil
}

// write hands the batch to the lower layer.
func (t *tx) write() error {
	if t.c.seg == nil {
		return t.c.s.writev(t.iov)
	}
	err := t.c.seg.WriteSegments(t.iov, t.seg.ends)
	t.seg.ends, t.seg.arena = t.seg.ends[:0], t.seg.arena[:0]
	return err
}

// closeWrite ends this end's direction gracefully: TCP's FIN, or the
// segLLP's (a Session Terminate over SCTP).
func (c *conn) closeWrite() error {
	if c.seg != nil {
		return c.seg.CloseWrite()
	}
	return c.s.tc.CloseWrite()
}

func (c *conn) setReadDeadline(t time.Time) {
	if c.seg != nil {
		c.seg.SetReadDeadline(t)
		return
	}
	c.s.tc.SetReadDeadline(t)
}

func (c *conn) setWriteDeadline(t time.Time) {
	if c.seg != nil {
		c.seg.SetWriteDeadline(t)
		return
	}
	c.s.tc.SetWriteDeadline(t)
}

// lingerSeg is linger over a segLLP: this end's graceful end after its
// Terminate, then the peer's segments are dropped until it ends too,
// terminateGrace passes, or QP.Close cuts it short.
func (c *conn) lingerSeg() {
	if c.seg.CloseWrite() != nil {
		return
	}
	c.seg.SetReadDeadline(time.Now().Add(terminateGrace))
	if c.abort.Load() {
		return
	}
	for {
		if _, err := c.seg.NextSegment(); err != nil {
			return
		}
	}
}
