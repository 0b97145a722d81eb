package sctp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// aliParam is the Adaptation Layer Indication parameter of INIT and
// INIT-ACK (section 5.1: type 0xC006, length 8, indication 1 for DDP), for
// backends that cannot put it there (pion/sctp): they carry the same eight
// octets at the start of the Private Data of every Session Initiate, Accept
// and Reject, and the receiver checks them per the table of 11.1. This is a
// deviation from the RFC, documented in docs/design.md.
var aliParam = [8]byte{0xc0, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01}

// ErrAdaptation is a peer whose Adaptation Layer Indication is missing or
// is not DDP's: "DDP procedures MUST NOT be performed" (11.1).
var ErrAdaptation = errors.New("sctp: peer does not indicate the DDP adaptation layer")

// answer is what an Initiate got back.
type answer struct {
	ev  Event
	pd  []byte
	err error
}

// Session is one DDP Stream Session: one end's view of the pair of SCTP
// streams of one number, from its Initiate to its Terminates. As the LLP
// of DDP it moves whole DDP Segments, in order: NextSegment and
// WriteSegments (RFC 5041 section 3).
type Session struct {
	a      *Association
	stream uint16

	mu      sync.Mutex
	cond    sync.Cond
	core    Core
	rx      *Reorder[rxChunk]
	ready   [][]byte // segments in DDP-SSN order, whole buffers
	rh, rn  int
	cur     []byte // the buffer of the segment NextSegment last returned
	pd      []byte // the Initiate's Private Data (passive)
	answer  chan answer
	err     error // the session failed (illegal sequence, lost association)
	closed  bool
	rdl     time.Time
	rtimer  *time.Timer
	offered bool // passed to AcceptSession

	wmu   sync.Mutex // the sender: DDP-SSN assignment and writes, in order
	txSSN uint16
	win   Window
	since int // chunks sent since unacked was last asked
	ssnb  [SSNLen]byte
	iov   [][]byte
	cbuf  []byte
}

type rxChunk struct {
	ppid uint32
	b    []byte
}

func newSession(a *Association, stream uint16, r Role) *Session {
	s := &Session{
		a: a, stream: stream, core: NewCore(r),
		rx:     NewReorder[rxChunk](a.cfg.Buffers / 2),
		ready:  make([][]byte, a.cfg.Buffers+1),
		answer: make(chan answer, 1),
		iov:    make([][]byte, 0, 64),
		cbuf:   make([]byte, 0, MaxControlLen),
	}
	s.cond.L = &s.mu
	return s
}

// Stream returns the number of the session's SCTP stream pair.
func (s *Session) Stream() uint16 { return s.stream }

// Association returns the association the session runs on.
func (s *Session) Association() *Association { return s.a }

// PrivateData returns the Private Data of the Initiate (passive end).
func (s *Session) PrivateData() []byte { return s.pd }

// MULPDU returns the largest DDP Segment WriteSegments takes (section 9).
func (s *Session) MULPDU() int { return MULPDU(s.a.maxChunk) }

// receive takes one message of the session's inbound stream (reader
// goroutine).
func (s *Session) receive(ppid uint32, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		s.a.putBuf(b)
		return
	}
	if len(b) < SSNLen {
		s.a.putBuf(b)
		s.failLocked(fmt.Errorf("%w: %d-octet chunk", ErrShortChunk, len(b)), true)
		return
	}
	if err := s.rx.Push(binary.BigEndian.Uint16(b), rxChunk{ppid, b}); err != nil {
		s.a.putBuf(b)
		s.failLocked(fmt.Errorf("%w (DDP-SSN %d, next %d)", err, binary.BigEndian.Uint16(b), s.rx.Next()), true)
		return
	}
	for s.err == nil {
		c, ok := s.rx.Pop()
		if !ok {
			break
		}
		s.process(c)
	}
	s.cond.Broadcast()
}

// process acts on the next chunk in DDP-SSN order; mu held.
func (s *Session) process(c rxChunk) {
	switch c.ppid {
	case PPIDSegment:
		o := s.core.Step(RecvSegment)
		if o.Event != EvSegment {
			s.a.putBuf(c.b)
			s.outputLocked(o, nil)
			return
		}
		s.ready[(s.rh+s.rn)%len(s.ready)] = c.b
		s.rn++
	case PPIDControl:
		m, err := ParseControl(c.b)
		if err != nil {
			s.a.putBuf(c.b)
			s.failLocked(err, true)
			return
		}
		pd, err := s.checkALI(m)
		if err != nil {
			s.a.putBuf(c.b)
			s.failLocked(err, true)
			return
		}
		pd = append([]byte(nil), pd...)
		s.a.putBuf(c.b)
		s.outputLocked(s.core.Step(RecvInput(m.Function())), pd)
	default:
		s.a.putBuf(c.b)
		s.failLocked(fmt.Errorf("sctp: chunk with PPID %#x on a DDP association", c.ppid), true)
	}
}

// checkALI strips and checks the inline Adaptation Layer Indication of a
// backend that cannot carry it in INIT (see aliParam).
func (s *Session) checkALI(m Control) ([]byte, error) {
	pd := m.PrivateData()
	if !s.a.be.inlineALI() || m.Function() == FuncTerminate {
		return pd, nil
	}
	if len(pd) < len(aliParam) || [8]byte(pd[:8]) != aliParam {
		return nil, fmt.Errorf("%w (%v)", ErrAdaptation, m.Function())
	}
	return pd[len(aliParam):], nil
}

// outputLocked carries out what the core decided on a received chunk.
func (s *Session) outputLocked(o Output, pd []byte) {
	if o.Send != 0 {
		s.sendAsync(o.Send)
	}
	switch o.Event {
	case EvInitiated:
		s.pd = pd
		select {
		case s.a.incoming <- s:
			s.offered = true
		default:
			// No room for more requests awaiting the ULP: a Terminate
			// answers it (6.4, 5.2.3).
			s.a.log.WithField("stream", s.stream).Warn("sctp: too many Session Initiates pending: answered with a Session Terminate")
			if o := s.core.Step(CallTerminate); o.Send != 0 {
				s.sendAsync(o.Send)
			}
			s.closeLocked(ErrNotAccepted)
		}
	case EvAccepted, EvRejected, EvNotAccepted:
		s.answer <- answer{ev: o.Event, pd: pd}
	case EvPeerClosed, EvClosed:
		// Readers see io.EOF once the segments before it are consumed.
	case EvIllegal:
		s.failLocked(o.Err, false)
	}
}

// failLocked terminates the session for err: a Terminate goes to the peer
// (unless one went already) and readers and writers fail.
func (s *Session) failLocked(err error, step bool) {
	if step && !s.core.sentTerm {
		// A chunk that cannot be taken at all ends the session like an
		// illegal sequence (6.1).
		s.core.sentTerm, s.core.state = true, StateClosed
		s.sendAsync(FuncTerminate)
	}
	if s.err == nil {
		s.err = err
		s.a.log.WithError(err).WithField("stream", s.stream).Warn("sctp: DDP Stream Session terminated")
	}
	select {
	case s.answer <- answer{ev: EvIllegal, err: err}:
	default:
	}
	s.cond.Broadcast()
	if s.core.Role() == Passive && !s.offered {
		s.closeLocked(err) // no one else will: free the stream
	}
}

// sendAsync sends a Session Control message from a goroutine of its own:
// the reader that decided to must not wait for the sender.
func (s *Session) sendAsync(f Function) {
	s.a.wg.Add(1)
	go func() {
		defer s.a.wg.Done()
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if err := s.sendControlLocked(f, nil); err != nil {
			s.a.log.WithError(err).Debugf("sctp: sending %v", f)
		}
	}()
}

// sendControlLocked sends a Session Control message; wmu held.
func (s *Session) sendControlLocked(f Function, pd []byte) error {
	var err error
	s.cbuf = s.cbuf[:0]
	var body []byte
	if s.a.be.inlineALI() && f != FuncTerminate {
		body = append(append(make([]byte, 0, len(aliParam)+len(pd)), aliParam[:]...), pd...)
	} else {
		body = pd
	}
	s.cbuf, err = AppendControl(s.cbuf, s.txSSN, f, body)
	if err != nil {
		return err
	}
	s.txSSN++
	s.since++
	s.win.Sent(1)
	return s.a.be.write(s.stream, PPIDControl, [][]byte{s.cbuf})
}

// call applies a local call that sends a Session Control message.
func (s *Session) call(in Input, pd []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	o := s.core.Step(in)
	s.mu.Unlock()
	if o.Err != nil {
		return o.Err
	}
	if o.Send == 0 {
		return nil
	}
	return s.sendControlLocked(o.Send, pd)
}

// MaxPrivateData returns the Private Data a Session Control message of this
// session takes from the ULP: 512 octets, less the inline Adaptation Layer
// Indication where it travels there.
func (s *Session) MaxPrivateData() int {
	if s.a.be.inlineALI() {
		return MaxPrivateData - len(aliParam)
	}
	return MaxPrivateData
}

// Accept answers the peer's Initiate with an Accept carrying pd (6.2).
func (s *Session) Accept(pd []byte) error { return s.call(CallAccept, pd) }

// Reject answers the peer's Initiate with a Reject carrying pd (6.3) and
// ends the session.
func (s *Session) Reject(pd []byte) error {
	err := s.call(CallReject, pd)
	s.Close()
	return err
}

// NextSegment returns the next DDP Segment in DDP-SSN order. The slice is
// valid until the next call. It returns io.EOF after the peer's Session
// Terminate, the peer's last chunk (6.2).
func (s *Session) NextSegment() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.a.putBuf(s.cur)
		s.cur = nil
	}
	for s.rn == 0 {
		switch {
		case s.err != nil:
			return nil, s.err
		case s.closed:
			return nil, ErrClosed
		case s.core.PeerTerminated():
			return nil, io.EOF
		case !s.rdl.IsZero() && !time.Now().Before(s.rdl):
			return nil, os.ErrDeadlineExceeded
		}
		s.cond.Wait()
	}
	b := s.ready[s.rh]
	s.ready[s.rh] = nil
	s.rh = (s.rh + 1) % len(s.ready)
	s.rn--
	s.cur = b
	return b[SSNLen:], nil
}

// SetReadDeadline bounds NextSegment's waits (a zero time: none).
func (s *Session) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rdl = t
	if s.rtimer != nil {
		s.rtimer.Stop()
		s.rtimer = nil
	}
	if !t.IsZero() {
		s.rtimer = time.AfterFunc(time.Until(t), func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
	}
	s.cond.Broadcast()
	return nil
}

// SetWriteDeadline bounds the writes of the session's stream.
func (s *Session) SetWriteDeadline(t time.Time) error {
	s.a.be.setWriteDeadline(s.stream, t)
	return nil
}

// WriteSegments sends DDP Segments, each one unordered chunk led by its
// DDP-SSN: segment i is bufs[ends[i-1]:ends[i]] concatenated (ends[-1] =
// 0). A segment larger than MULPDU is refused (section 9).
func (s *Session) WriteSegments(bufs [][]byte, ends []int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	err := s.err
	if err == nil && s.closed {
		err = ErrClosed
	}
	if err == nil {
		err = s.core.Step(CallSegment).Err
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	start := 0
	mulpdu := s.MULPDU()
	for _, e := range ends {
		n := 0
		for _, b := range bufs[start:e] {
			n += len(b)
		}
		if n > mulpdu {
			return fmt.Errorf("%w: %d octets, at most %d", ErrChunkTooLarge, n, mulpdu)
		}
		if err := s.waitWindow(); err != nil {
			return err
		}
		PutSSN(s.ssnb[:], s.txSSN)
		s.iov = append(append(s.iov[:0], s.ssnb[:]), bufs[start:e]...)
		err := s.a.be.write(s.stream, PPIDSegment, s.iov)
		clear(s.iov)
		if err != nil {
			return err
		}
		s.txSSN++
		s.since++
		s.win.Sent(1)
		start = e
	}
	return nil
}

// waitWindow holds the sender while 32767 chunks of the stream may be
// unacknowledged (section 10). It asks the backend only when the chunks
// sent since it last did could have filled the window, and waits for the
// backend's notification of acknowledgments (armed before it asks, so
// none is missed) or the association's end.
func (s *Session) waitWindow() error {
	if s.since < MaxInFlight {
		return nil
	}
	for {
		acked := s.a.be.ackNotify(s.stream)
		u := s.a.be.unacked(s.stream)
		if s.win.Room(u) > 0 {
			s.since = u
			return nil
		}
		select {
		case <-s.a.done:
			return s.a.err
		case <-acked:
		}
	}
}

// CloseWrite sends this end's Session Terminate, its last chunk (6.2).
func (s *Session) CloseWrite() error { return s.call(CallTerminate, nil) }

// Close ends the session at once: a Terminate goes to the peer unless one
// went already, readers fail with ErrClosed and the stream is freed.
func (s *Session) Close() error {
	s.call(CallTerminate, nil)
	s.mu.Lock()
	s.closeLocked(ErrClosed)
	s.mu.Unlock()
	return nil
}

func (s *Session) closeLocked(err error) {
	if s.closed {
		return
	}
	s.closed = true
	if s.err == nil && err != ErrClosed {
		s.err = err
	}
	if s.cur != nil {
		s.a.putBuf(s.cur)
		s.cur = nil
	}
	for ; s.rn > 0; s.rn-- {
		s.a.putBuf(s.ready[s.rh])
		s.ready[s.rh] = nil
		s.rh = (s.rh + 1) % len(s.ready)
	}
	s.rx.Drain(func(c rxChunk) { s.a.putBuf(c.b) })
	if s.rtimer != nil {
		s.rtimer.Stop()
	}
	s.cond.Broadcast()
	s.a.release(s)
}

// lost fails the session because the association ended.
func (s *Session) lost(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && !s.core.PeerTerminated() {
		s.err = fmt.Errorf("sctp: association lost: %w", err)
	}
	select {
	case s.answer <- answer{ev: EvIllegal, err: err}:
	default:
	}
	s.cond.Broadcast()
}

// Err returns why the session failed, or nil.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
