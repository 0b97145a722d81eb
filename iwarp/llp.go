package iwarp

import (
	"time"
)

// llp is the Lower Layer Protocol under the DDP/RDMAP engine (RFC 5041
// section 3): it carries DDP Segments whole and in order, checks their
// integrity, reports the largest one it takes (MULPDU), and ends gracefully
// or abortively. The engine (rx.go, tx.go, conn.go) uses it without knowing
// which one it has:
//
//   - mpaLLP (llp_mpa.go): MPA over TCP (RFC 5044, RFC 6581), FPDUs with
//     CRCs and Markers, read straight into place and written in batches;
//   - segLLP (llp_sctp.go): DDP over SCTP (RFC 5043), in the kernel or in
//     userspace over UDP (package iwarp/sctp), which keeps segment
//     boundaries and checks its own digest.
//
// The receive methods and discard belong to the receiver goroutine, the
// transmit methods to the sender; deadlines, closeWrite and close may be
// called from either or from the reaper.
type llp interface {
	// receive hands the peer's DDP Segments to the receiver's DDP/RDMAP
	// core (r.start, r.data, r.dest and r.placedDirect, r.end) until the peer
	// ends its half between segments (nil) or an error: a *protoError for
	// the peer's protocol violations (a Terminate follows), any other
	// error for a lost stream.
	receive(r *rx) error
	// verifiesFirst reports whether receive hands over only segments
	// already verified (SCTP checks its checksum before delivering a
	// message); MPA verifies an FPDU's CRC at its end, after its payload
	// has been placed, so a Verified region's payload is staged until then.
	verifiesFirst() bool
	// discard reads and drops what the peer sends, for linger; an error
	// (the peer's end, a deadline) ends it.
	discard() error

	// holdsFirstTx reports whether this end may send nothing before a
	// valid segment arrives (RFC 5044 7.1.2 rule 4: the MPA Responder).
	holdsFirstTx() bool
	// startBatch begins a batch of segments; bulk says the last batch
	// moved a lot, so that the LLP may re-read its MULPDU sooner.
	startBatch(bulk bool) error
	// maxULPDU is the largest DDP Segment the next appendULPDU takes.
	maxULPDU() int
	// appendULPDU adds one DDP Segment, hdr then payload, to the batch in
	// iov and returns it; errBatchFull when the batch must be written
	// first. The iovecs may point into payload and into the LLP's own
	// buffers until write returns.
	appendULPDU(iov [][]byte, hdr []byte, payload [][]byte) ([][]byte, error)
	// write sends the batch; the LLP is then ready for the next.
	write(iov [][]byte) error
	// postsDirect reports whether tryWrite never waits, so that a poster
	// may transmit in its own goroutine (conn.post).
	postsDirect() bool
	// tryWrite sends what of the batch the LLP takes now, without
	// waiting, and returns the rest (nil when all went); write finishes
	// it, and only then does the next batch start.
	tryWrite(iov [][]byte) ([][]byte, error)

	setReadDeadline(time.Time)
	setWriteDeadline(time.Time)
	// awaitAnswer tells the receiver that the ULP waits for an answer
	// (QP.AwaitAnswer).
	awaitAnswer()
	// closeWrite ends this end's direction gracefully after what was
	// written: TCP's FIN, SCTP's Session Terminate.
	closeWrite() error
	// close releases the LLP: abortively (a reset, so that the peer sees
	// the stream lost rather than ended) or not.
	close(abortive bool)
}

// linger ends a stream whose last message is the Terminate this end sent:
// the LLP's graceful end after it, then the peer's octets are read and
// dropped until the peer ends too, terminateGrace passes, or QP.Close cuts
// it short. Closing at once, with the peer's octets unread, would send a
// RST instead of a FIN; a peer still writing then sees its writes fail, and
// may fail its QP with that error before its receiver has read the
// Terminate that says why.
func (c *conn) linger() {
	if c.l.closeWrite() != nil {
		return
	}
	c.l.setReadDeadline(time.Now().Add(terminateGrace))
	if c.abort.Load() { // after the deadline: see abortLinger
		return
	}
	for c.l.discard() == nil {
	}
}
