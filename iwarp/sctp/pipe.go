package sctp

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// PipeConfig shapes an in-memory association pair.
type PipeConfig struct {
	Config
	// MaxUserData is the user data of one DATA chunk (0: 65472, as on
	// IPv4 loopback).
	MaxUserData int
	// Swap delivers a chunk after the next one whenever that one is
	// already queued behind it, as an SCTP sender that reorders unordered
	// chunks may (section 10).
	Swap bool
}

// Pipe returns two associations joined in memory, for tests of what runs
// above the adaptation layer: chunks cross as whole messages, unordered
// (swapped in pairs with PipeConfig.Swap), without loss.
func Pipe(cfg PipeConfig) (a, b *Association) {
	c := cfg.Config.withDefaults()
	if cfg.MaxUserData == 0 {
		cfg.MaxUserData = UserDataForMTU(65536, IPv4HeaderLen)
	}
	x := &pipeEnd{in: make(chan pipeMsg, 4096), done: make(chan struct{}), cfg: cfg}
	y := &pipeEnd{in: make(chan pipeMsg, 4096), done: make(chan struct{}), cfg: cfg}
	x.peer, y.peer = y, x
	return newAssociation(x, c), newAssociation(y, c)
}

// closedChan is a notification that has always come already.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type pipeMsg struct {
	stream uint16
	ppid   uint32
	b      []byte
}

type pipeAddr string

func (p pipeAddr) Network() string { return "pipe" }
func (p pipeAddr) String() string  { return string(p) }

type pipeEnd struct {
	peer  *pipeEnd
	cfg   PipeConfig
	in    chan pipeMsg
	done  chan struct{}
	once  sync.Once
	swaps atomic.Int64 // pairs delivered in reverse
	hold  sync.Mutex   // held (by a test) to pause delivery
}

func (p *pipeEnd) start(a *Association) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			var m pipeMsg
			select {
			case m = <-p.in:
			case <-p.done:
				a.end(ErrLost)
				return
			case <-p.peer.done:
				a.end(ErrLost)
				return
			}
			p.hold.Lock()
			p.hold.Unlock()
			if p.cfg.Swap {
				// With another chunk already queued behind this one,
				// deliver that one first.
				select {
				case m2 := <-p.in:
					p.swaps.Add(1)
					if !p.take(a, m2) {
						return
					}
				default:
				}
			}
			if !p.take(a, m) {
				return
			}
		}
	}()
}

func (p *pipeEnd) take(a *Association, m pipeMsg) bool {
	buf := a.getBuf()
	if buf == nil {
		return false
	}
	if len(m.b) > len(buf) {
		a.putBuf(buf)
		a.end(ErrChunkTooLarge)
		return false
	}
	a.deliver(m.stream, m.ppid, buf[:copy(buf, m.b)])
	return true
}

func (p *pipeEnd) open(uint16) error { return nil }

func (p *pipeEnd) write(stream uint16, ppid uint32, bufs [][]byte) error {
	var b []byte
	for _, x := range bufs {
		b = append(b, x...)
	}
	select {
	case p.peer.in <- pipeMsg{stream, ppid, b}:
		return nil
	case <-p.done:
		return ErrClosed
	case <-p.peer.done:
		return ErrLost
	}
}

func (p *pipeEnd) unacked(uint16) int                 { return 0 }
func (p *pipeEnd) ackNotify(uint16) <-chan struct{}   { return closedChan }
func (p *pipeEnd) maxUserData() int                   { return p.cfg.MaxUserData }
func (p *pipeEnd) streams() int                       { return p.cfg.Config.withDefaults().Streams }
func (p *pipeEnd) inlineALI() bool                    { return false }
func (p *pipeEnd) setWriteDeadline(uint16, time.Time) {}
func (p *pipeEnd) shutdown() error                    { p.once.Do(func() { close(p.done) }); return nil }
func (p *pipeEnd) abort() error                       { return p.shutdown() }
func (p *pipeEnd) localAddr() net.Addr                { return pipeAddr("pipe") }
func (p *pipeEnd) remoteAddr() net.Addr               { return pipeAddr("pipe") }
