package sctp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// backend is one SCTP implementation under the adaptation layer: kernel
// SCTP (kernel_linux.go) or pion/sctp over UDP (udp.go).
type backend interface {
	// start runs the readers: they take buffers from a.getBuf, fill each
	// with one whole message (user data of a Payload Data Chunk), and
	// hand it to a.deliver; when the association ends they call a.end.
	start(a *Association)
	// open readies a stream this end opens (the peer's are found as their
	// first chunk arrives).
	open(stream uint16) error
	// write sends bufs, concatenated, as one unordered (U bit) DATA chunk
	// with the PPID (section 10).
	write(stream uint16, ppid uint32, bufs [][]byte) error
	// unacked returns an upper bound on the chunks of the stream handed to
	// SCTP and not yet acknowledged (section 10).
	unacked(stream uint16) int
	// ackNotify arms a notification of acknowledgment progress on the
	// stream and returns the channel it comes on: after the call, any
	// chunk of the stream acknowledged (one at least, or all: a backend
	// may wait until SCTP has nothing outstanding) sends on it.
	ackNotify(stream uint16) <-chan struct{}
	// maxUserData returns the user data one DATA chunk carries without SCTP
	// or IP fragmentation (section 9).
	maxUserData() int
	// streams returns the association's stream count, equal inbound and
	// outbound (section 8).
	streams() int
	// inlineALI reports that the backend cannot put the Adaptation Layer
	// Indication in INIT and INIT-ACK: the check of 11.1 then travels in
	// the Session Initiate, Accept and Reject (see aliParam).
	inlineALI() bool
	setWriteDeadline(stream uint16, t time.Time)
	shutdown() error // graceful (SHUTDOWN), after what was sent is delivered
	abort() error    // ABORT
	localAddr() net.Addr
	remoteAddr() net.Addr
}

// Config is an association's configuration.
type Config struct {
	// Streams is the number of SCTP streams requested in each direction
	// (equal: section 8). 0 means DefaultStreams.
	Streams int
	// MTU is the packet size the userspace backend uses (0: DefaultUDPMTU).
	// The kernel backend follows the path MTU.
	MTU int
	// Buffers is the number of receive buffers of the association, each
	// of one maximum chunk (0: DefaultBuffers). Chunks received and not
	// yet consumed by the sessions hold them; when none is free, reading
	// from SCTP pauses and SCTP's receive window closes. A session holds
	// at most half of them out of order.
	Buffers int
	// Log receives the association's events (logrus.StandardLogger when
	// nil).
	Log *logrus.Entry
}

// Defaults of Config.
const (
	DefaultStreams = 16
	DefaultBuffers = 256
	// MaxPendingInitiates bounds the Session Initiates waiting for the ULP
	// per association; beyond it an Initiate is answered with a Session
	// Terminate (6.4, 5.2.3).
	MaxPendingInitiates = 16
)

func (c Config) withDefaults() Config {
	if c.Streams <= 0 {
		c.Streams = DefaultStreams
	}
	if c.Streams > 65535 {
		c.Streams = 65535
	}
	if c.Buffers <= 0 {
		c.Buffers = DefaultBuffers
	}
	c.Buffers = max(c.Buffers, 4)
	if c.Log == nil {
		c.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	return c
}

// ErrClosed is an operation on a session or association that has ended.
var ErrClosed = errors.New("sctp: closed")

// ErrChunkTooLarge is a DDP Segment larger than the maximum (section 9:
// "MUST reject DDP Segments that are larger than the maximum size").
var ErrChunkTooLarge = errors.New("sctp: DDP Segment larger than the maximum")

// Association is an SCTP association carrying DDP Streams: each DDP Stream
// Session runs on the pair of SCTP streams of one number (sections 2, 8).
type Association struct {
	be       backend
	cfg      Config
	maxChunk int
	recvSize int
	log      *logrus.Entry

	pool chan []byte // free receive buffers

	mu       sync.Mutex
	sessions map[uint16]*Session
	incoming chan *Session // passive sessions waiting for AcceptSession

	done    chan struct{}
	endOnce sync.Once
	err     error // why the association ended
	wg      sync.WaitGroup
}

func newAssociation(be backend, cfg Config) *Association {
	a := &Association{
		be: be, cfg: cfg, log: cfg.Log,
		maxChunk: MaxChunk(be.maxUserData()),
		pool:     make(chan []byte, cfg.Buffers),
		sessions: make(map[uint16]*Session),
		incoming: make(chan *Session, MaxPendingInitiates),
		done:     make(chan struct{}),
	}
	// A chunk larger than this end's maximum is refused (section 9): the
	// backend ends the association.
	a.recvSize = a.maxChunk
	for range cfg.Buffers {
		a.pool <- make([]byte, a.recvSize)
	}
	be.start(a)
	return a
}

// MaxChunk returns the largest chunk this end sends (section 9).
func (a *Association) MaxChunk() int { return a.maxChunk }

// Streams returns the number of streams in each direction.
func (a *Association) Streams() int { return a.be.streams() }

// LocalAddr and RemoteAddr return the association's primary addresses.
func (a *Association) LocalAddr() net.Addr  { return a.be.localAddr() }
func (a *Association) RemoteAddr() net.Addr { return a.be.remoteAddr() }

// Done is closed when the association has ended.
func (a *Association) Done() <-chan struct{} { return a.done }

// Err returns why the association ended (nil while it runs, ErrClosed after
// Shutdown).
func (a *Association) Err() error {
	select {
	case <-a.done:
		return a.err
	default:
		return nil
	}
}

// getBuf returns a free receive buffer, waiting for one; nil once the
// association has ended.
func (a *Association) getBuf() []byte {
	select {
	case b := <-a.pool:
		return b
	default:
	}
	select {
	case b := <-a.pool:
		return b
	case <-a.done:
		return nil
	}
}

func (a *Association) putBuf(b []byte) {
	if cap(b) < a.recvSize {
		return
	}
	select {
	case a.pool <- b[:a.recvSize]:
	default:
	}
}

// deliver takes one received message of the stream (the buffer with it).
func (a *Association) deliver(stream uint16, ppid uint32, b []byte) {
	a.mu.Lock()
	s := a.sessions[stream]
	if s == nil {
		select {
		case <-a.done:
			a.mu.Unlock()
			a.putBuf(b)
			return
		default:
		}
		// A chunk on a stream with no session begins one, with this end
		// passive; its first chunk in DDP-SSN order must be an Initiate.
		s = newSession(a, stream, Passive)
		a.sessions[stream] = s
	}
	a.mu.Unlock()
	s.receive(ppid, b)
}

// end records why the association ended and fails every session.
func (a *Association) end(err error) {
	a.endOnce.Do(func() {
		if err == nil {
			err = ErrClosed
		}
		a.mu.Lock()
		a.err = err
		close(a.done)
		ss := make([]*Session, 0, len(a.sessions))
		for _, s := range a.sessions {
			ss = append(ss, s)
		}
		a.mu.Unlock()
		for _, s := range ss {
			s.lost(err)
		}
		a.log.WithError(err).Debug("sctp: association ended")
	})
}

// release forgets a session that has ended, freeing its stream.
func (a *Association) release(s *Session) {
	a.mu.Lock()
	if a.sessions[s.stream] == s {
		delete(a.sessions, s.stream)
	}
	a.mu.Unlock()
}

// Initiate starts a DDP Stream Session on stream as its active end: it
// sends the Session Initiate with pd and waits for the answer (6.2-6.4).
// It returns the session and the Private Data of the peer's Accept; a
// *RejectedError for a Reject, ErrNotAccepted for a Terminate.
func (a *Association) Initiate(ctx context.Context, stream uint16, pd []byte) (*Session, []byte, error) {
	if int(stream) >= a.be.streams() {
		return nil, nil, fmt.Errorf("sctp: stream %d of an association with %d", stream, a.be.streams())
	}
	if err := a.be.open(stream); err != nil {
		return nil, nil, err
	}
	a.mu.Lock()
	select {
	case <-a.done:
		a.mu.Unlock()
		return nil, nil, a.err
	default:
	}
	if a.sessions[stream] != nil {
		a.mu.Unlock()
		return nil, nil, fmt.Errorf("sctp: stream %d already carries a DDP Stream Session", stream)
	}
	s := newSession(a, stream, Active)
	a.sessions[stream] = s
	a.mu.Unlock()
	if err := s.call(CallInitiate, pd); err != nil {
		s.Close()
		return nil, nil, err
	}
	select {
	case ans := <-s.answer:
		switch ans.ev {
		case EvAccepted:
			return s, ans.pd, nil
		case EvRejected:
			s.Close()
			return nil, ans.pd, &RejectedError{PrivateData: ans.pd}
		case EvNotAccepted:
			s.Close()
			return nil, nil, ErrNotAccepted
		}
		s.Close()
		return nil, nil, ans.err
	case <-ctx.Done():
		s.Close()
		return nil, nil, ctx.Err()
	}
}

// ErrNotAccepted is an Initiate answered with a Session Terminate: the
// passive end did not pass it to its ULP (6.4).
var ErrNotAccepted = errors.New("sctp: DDP Stream Session not accepted (Session Terminate)")

// RejectedError is an Initiate that the peer's ULP rejected (6.3), with the
// Private Data of its Reject.
type RejectedError struct{ PrivateData []byte }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("sctp: DDP Stream Session rejected (%d octets of Private Data)", len(e.PrivateData))
}

// AcceptSession waits for a DDP Stream Session the peer initiates. The
// ULP then answers it with Session.Accept or Session.Reject.
func (a *Association) AcceptSession(ctx context.Context) (*Session, error) {
	select {
	case s := <-a.incoming:
		return s, nil
	case <-a.done:
		return nil, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Shutdown ends the association gracefully: what was sent is delivered,
// then SCTP's SHUTDOWN (11.3).
func (a *Association) Shutdown() error {
	err := a.be.shutdown()
	a.end(ErrClosed)
	a.wg.Wait()
	return err
}

// Abort ends the association at once with an ABORT.
func (a *Association) Abort() error {
	err := a.be.abort()
	a.end(ErrClosed)
	a.wg.Wait()
	return err
}
