package iwarp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/sctp"
)

// DefaultStartupTimeout bounds each wait of the MPA Startup (RFC 5044
// 7.1.2 rule 10).
const DefaultStartupTimeout = 10 * time.Second

// DefaultMaxStartups and DefaultMaxStartupsPerPeer bound the connections
// a Listener holds before their MPA Request (ConnConfig.MaxStartups).
const (
	DefaultMaxStartups        = 64
	DefaultMaxStartupsPerPeer = 8
)

// DefaultReadSpin is the ReadSpin ddptarget and ddpinitiator use: about
// one small I/O's turnaround at the peer (docs/performance.md).
const DefaultReadSpin = 50 * time.Microsecond

// DefaultReadDepth is the IRD and ORD offered when a ConnConfig sets
// neither.
const DefaultReadDepth = 16

// ConnConfig is one end's connection parameters.
type ConnConfig struct {
	// MPA is this end's MPA Startup configuration: revision, Markers, CRC
	// preference, IRD/ORD (DefaultReadDepth each when both are 0),
	// peer-to-peer RTR.
	MPA mpa.StartupConfig
	// PrivateData goes in this end's MPA Request (Connect); a Listener's
	// is unused (ConnRequest.Accept takes the Reply's).
	PrivateData []byte
	// StartupTimeout bounds each Startup wait (DefaultStartupTimeout).
	StartupTimeout time.Duration
	// MaxStartups bounds the connections a Listener holds while their MPA
	// Request has not arrived (DefaultMaxStartups), MaxStartupsPerPeer
	// those from one IP address (DefaultMaxStartupsPerPeer): beyond them a
	// new connection is closed at once and counted (Listener.Refused), so
	// that half-sent Requests cannot use up the process's descriptors.
	MaxStartups, MaxStartupsPerPeer int
	// EMSS, when not 0, fixes the EMSS that FPDUs are sized for instead of
	// reading TCP_MAXSEG (tests use it to force many FPDUs).
	EMSS int
	// ReadSpin, when positive, is how long the receiver keeps polling a
	// quiet socket between messages, counted from this end's last write
	// (what it waits for is the answer to that), before it sleeps until
	// the poller wakes it. A sleep and its wake-up cost a small I/O more
	// than the network does, most of all in a virtual machine:
	// DefaultReadSpin took a pinned QD1 4 KiB read from about 15K to 25K
	// IOPS. A peer that answers more slowly gets a longer spin, up to
	// spin.MaxFactor times ReadSpin: twice its measured turnaround
	// (spin.Turnaround; a target serving a FUSE mount at QD1 waits 70-90
	// µs for each command). While a receiver spins (yielding), its
	// processor does not poll the network for the other goroutines: the
	// spin stops as soon as the connection's own sender waits for socket
	// space (a 1 MiB WRITE's Read Responses fell to 0.4x without that),
	// and other connections of the process wait at most the spin. 0 (the
	// engine's default) never spins; ddptarget and ddpinitiator use
	// DefaultReadSpin.
	ReadSpin time.Duration
	// ReadSpinAwaitedOnly keeps the receiver from spinning between
	// messages except for an answer the ULP awaits (QP.AwaitAnswer). A
	// process that shares its CPU with the program doing the I/O (a FUSE
	// mount, pinned with fio) must not spin while that program has work,
	// yet gains from spinning for the one answer that program is blocked
	// on: the sleep and wake-up it saves cost a 4 KiB I/O more than the
	// network does. Needs a positive ReadSpin.
	ReadSpinAwaitedOnly bool
	// SCTP configures the association of a connection over network "sctp"
	// (kernel SCTP) or "sctp-udp" (userspace SCTP over UDP): DDP over SCTP
	// (RFC 5043) instead of MPA/TCP. Of MPA only IRD and ORD apply there.
	SCTP sctp.Config
}

func (c ConnConfig) withDefaults() ConnConfig {
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = DefaultStartupTimeout
	}
	if c.MaxStartups <= 0 {
		c.MaxStartups = DefaultMaxStartups
	}
	if c.MaxStartupsPerPeer <= 0 {
		c.MaxStartupsPerPeer = DefaultMaxStartupsPerPeer
	}
	if c.MPA.IRD == 0 && c.MPA.ORD == 0 {
		c.MPA.IRD, c.MPA.ORD = DefaultReadDepth, DefaultReadDepth
	}
	return c
}

// RejectedError is a Connect the Responder rejected (the R bit of its MPA
// Reply), with the Reply's Private Data, which may say why.
type RejectedError struct {
	PrivateData []byte
}

func (e *RejectedError) Error() string {
	if len(e.PrivateData) > 0 {
		return fmt.Sprintf("iwarp: connection rejected by the peer: %q", e.PrivateData)
	}
	return "iwarp: connection rejected by the peer"
}

func (e *RejectedError) Unwrap() error { return mpa.ErrRejected }

// ErrNoMPAReply: Connect sent its MPA Request and no valid MPA Reply came
// (the error wraps why: a timeout, the stream's end, a malformed frame).
var ErrNoMPAReply = errors.New("iwarp: waiting for MPA Reply")

// Connect opens a TCP connection to addr, runs the MPA Startup as the
// Initiator and, once the peer accepts, puts the QP in Full Operation. It
// returns the Private Data of the peer's Reply.
//
// Network "sctp" (kernel SCTP) or "sctp-udp" (userspace SCTP over UDP) runs
// DDP over SCTP instead (RFC 5043): a new association, and a DDP Stream
// Session Initiate and Accept in place of the MPA Request and Reply.
func (q *QP) Connect(ctx context.Context, network, addr string, cfg ConnConfig) ([]byte, error) {
	cfg = cfg.withDefaults()
	if sctp.IsNetwork(network) {
		return q.connectSCTP(ctx, network, addr, cfg)
	}
	if s := q.State(); s != StateIdle {
		return nil, fmt.Errorf("%w: Connect in state %v", ErrQPState, s)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := nc.(*net.TCPConn)
	ok := false
	defer func() {
		if !ok {
			tc.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	tc.SetDeadline(time.Now().Add(cfg.StartupTimeout))
	req := cfg.MPA.Request(cfg.PrivateData)
	frame, err := req.Append(nil)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Write(frame); err != nil {
		return nil, fmt.Errorf("iwarp: sending MPA Request: %w", err)
	}
	reply, err := readStartup(tc, mpa.Reply)
	if err != nil {
		return nil, fmt.Errorf("%w from %s: %w", ErrNoMPAReply, addr, err)
	}
	peer := reply.Startup()
	pd := append([]byte(nil), peer.PrivateData...)
	if peer.R {
		return pd, &RejectedError{PrivateData: pd}
	}
	neg, err := mpa.Negotiate(mpa.Initiator, &cfg.MPA, &peer)
	if err != nil {
		return pd, err
	}
	if err := ctx.Err(); err != nil {
		return pd, err
	}
	if !stop() {
		return pd, ctx.Err()
	}
	tc.SetDeadline(time.Time{})
	if err := q.attach(tc, neg, cfg); err != nil {
		return pd, err
	}
	ok = true
	return pd, nil
}

// attach puts the QP in Full Operation over tc.
func (q *QP) attach(tc *net.TCPConn, neg mpa.Negotiated, cfg ConnConfig) error {
	// No Nagle: FPDUs go out as the sender hands them over, so that TCP
	// segments start at FPDU boundaries (RFC 5044 5.1). Go's default, made
	// explicit.
	if err := tc.SetNoDelay(true); err != nil {
		return err
	}
	s, err := newSock(tc, cfg.ReadSpin)
	if err != nil {
		return err
	}
	s.awaitedOnly = cfg.ReadSpinAwaitedOnly
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn != nil || q.State() != StateIdle || q.closing {
		return fmt.Errorf("%w: QP is %v", ErrQPState, q.State())
	}
	c := newConn(q, newMPALLP(s, neg, cfg.EMSS), neg)
	s.caught = &c.stats.spinCaught
	q.conn = c
	q.state.Store(uint32(StateRTS))
	c.start()
	return nil
}

// Disconnect closes the connection gracefully (RFC 5041 6.2.1): work
// already posted goes out (RDMA Reads complete first), then TCP's FIN; new
// work is refused. The peer sends what it has queued and closes too; then
// both QPs reach StateError with the rest flushed, and Err stays nil on
// both sides. Wait on Done. A peer that closes while this end's RDMA Reads
// are outstanding, or resets, makes it an error after all (MPA error 1).
func (q *QP) Disconnect() {
	q.mu.Lock()
	c := q.conn
	q.mu.Unlock()
	if c == nil {
		q.fail(ErrClosed)
		return
	}
	q.state.CompareAndSwap(uint32(StateRTS), uint32(StateClosing))
	c.graceful.Store(true)
	c.wake()
}

// readStartup reads one MPA Startup frame from r.
func readStartup(r io.Reader, expect mpa.StartupKind) (mpa.StartupFrame, error) {
	buf := make([]byte, mpa.MaxStartupFrame)
	if _, err := io.ReadFull(r, buf[:mpa.StartupHeaderLen]); err != nil {
		return nil, err
	}
	pd, err := mpa.ParseStartupHeader(buf, expect, mpa.MaxPrivateData)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(r, buf[mpa.StartupHeaderLen:mpa.StartupHeaderLen+pd]); err != nil {
		return nil, err
	}
	return mpa.ParseStartup(buf[:mpa.StartupHeaderLen+pd], expect, mpa.MaxPrivateData)
}

// Listener accepts MPA connections. Each TCP connection's Startup runs on
// its own goroutine, so a slow or silent client delays no one else.
type Listener struct {
	dev  *Device
	ln   *net.TCPListener
	sl   sctp.Listener // instead of ln, over SCTP
	cfg  ConnConfig
	reqs chan *ConnRequest
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu      sync.Mutex
	pending map[*net.TCPConn]struct{}
	perPeer map[string]int // pending, by IP address
	refused atomic.Uint64
	// Errs counts connections dropped for a bad MPA Request, by reason.
	errs []error
}

// Listen listens for MPA Initiators on addr; over network "sctp" or
// "sctp-udp", for SCTP associations whose DDP Stream Session Initiates
// come to Accept as ConnRequests (RFC 5043).
func (d *Device) Listen(network, addr string, cfg ConnConfig) (*Listener, error) {
	if sctp.IsNetwork(network) {
		return d.listenSCTP(network, addr, cfg)
	}
	nl, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{dev: d, ln: nl.(*net.TCPListener), cfg: cfg.withDefaults(), reqs: make(chan *ConnRequest),
		done: make(chan struct{}), pending: make(map[*net.TCPConn]struct{}), perPeer: map[string]int{}}
	if err := d.addListener(l); err != nil {
		nl.Close()
		return nil, err
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr {
	if l.sl != nil {
		return l.sl.Addr()
	}
	return l.ln.Addr()
}

// Close stops listening and closes connections still in their Startup.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.dev.removeListener(l)
		close(l.done)
		if l.sl != nil {
			l.sl.Close()
		} else {
			l.ln.Close()
		}
		l.mu.Lock()
		for tc := range l.pending {
			tc.Close()
		}
		l.mu.Unlock()
	})
	l.wg.Wait()
	return nil
}

// StartupErrors returns the errors of connections dropped during the MPA
// Startup (bad Requests, timeouts), oldest first, and forgets them.
func (l *Listener) StartupErrors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.errs
	l.errs = nil
	return e
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		tc, err := l.ln.AcceptTCP()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		ip := peerIP(tc.RemoteAddr())
		l.mu.Lock()
		if len(l.pending) >= l.cfg.MaxStartups || l.perPeer[ip] >= l.cfg.MaxStartupsPerPeer {
			l.mu.Unlock()
			l.refused.Add(1)
			tc.SetLinger(0) // a reset: nothing is owed to a flood
			tc.Close()
			continue
		}
		l.pending[tc] = struct{}{}
		l.perPeer[ip]++
		l.mu.Unlock()
		l.wg.Add(1)
		go l.startup(tc)
	}
}

// startup reads and validates one connection's MPA Request and offers it to
// Accept.
func (l *Listener) startup(tc *net.TCPConn) {
	defer l.wg.Done()
	tc.SetDeadline(time.Now().Add(l.cfg.StartupTimeout))
	f, err := readStartup(tc, mpa.Request)
	// From here on Close no longer closes tc for us: either it is handed
	// to Accept, or closed below.
	l.mu.Lock()
	delete(l.pending, tc)
	if ip := peerIP(tc.RemoteAddr()); l.perPeer[ip] > 1 {
		l.perPeer[ip]--
	} else {
		delete(l.perPeer, ip)
	}
	if err != nil && len(l.errs) < 64 {
		l.errs = append(l.errs, fmt.Errorf("iwarp: MPA Request from %s: %w", tc.RemoteAddr(), err))
	}
	l.mu.Unlock()
	if err != nil {
		tc.Close()
		return
	}
	peer := f.Startup()
	peer.PrivateData = append([]byte(nil), peer.PrivateData...)
	req := &ConnRequest{l: l, tc: tc, peer: peer, RemoteAddr: tc.RemoteAddr()}
	select {
	case l.reqs <- req:
	case <-l.done:
		tc.Close()
	}
}

// Accept waits for the next connection whose MPA Request is valid.
func (l *Listener) Accept(ctx context.Context) (*ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ConnRequest is a valid MPA Request waiting for the ULP's decision: Accept
// with a QP, or Reject.
type ConnRequest struct {
	l          *Listener
	tc         *net.TCPConn
	sess       *sctp.Session // instead of tc, over SCTP
	peer       mpa.Startup
	RemoteAddr net.Addr
	once       sync.Once
}

// PrivateData returns the Request's Private Data (without the revision-2
// IRD/ORD word).
func (r *ConnRequest) PrivateData() []byte { return r.peer.PrivateData }

// Revision returns the Request's MPA revision.
func (r *ConnRequest) Revision() uint8 { return r.peer.Rev }

// Accept answers with an accepting MPA Reply carrying pd and puts qp in
// Full Operation. When the Request asks for what this end cannot do (for
// example Markers it refuses), it answers with a rejecting Reply instead
// and returns why.
func (r *ConnRequest) Accept(qp *QP, pd []byte) error {
	err := ErrClosed
	r.once.Do(func() { err = r.accept(qp, pd) })
	return err
}

func (r *ConnRequest) accept(qp *QP, pd []byte) error {
	if r.sess != nil {
		return r.acceptSCTP(qp, pd)
	}
	cfg := r.l.cfg
	neg, err := mpa.Negotiate(mpa.Responder, &cfg.MPA, &r.peer)
	if err != nil {
		reply := neg.Reply(true, nil)
		r.sendReply(&reply)
		r.tc.Close()
		return err
	}
	if s := qp.State(); s != StateIdle {
		r.reject(nil) // not Reject: r.once is held
		return fmt.Errorf("%w: Accept with a QP in state %v", ErrQPState, s)
	}
	reply := neg.Reply(false, pd)
	if err := r.sendReply(&reply); err != nil {
		r.tc.Close()
		return err
	}
	r.tc.SetDeadline(time.Time{})
	if err := qp.attach(r.tc, neg, cfg); err != nil {
		r.tc.Close()
		return err
	}
	return nil
}

// Reject answers with a rejecting MPA Reply (the R bit) carrying pd, then
// closes the connection.
func (r *ConnRequest) Reject(pd []byte) error {
	err := ErrClosed
	r.once.Do(func() { err = r.reject(pd) })
	return err
}

func (r *ConnRequest) reject(pd []byte) error {
	if r.sess != nil {
		return r.rejectSCTP(pd)
	}
	neg, _ := mpa.Negotiate(mpa.Responder, &r.l.cfg.MPA, &r.peer) // reject whatever the parameters
	reply := neg.Reply(true, pd)
	err := r.sendReply(&reply)
	r.tc.Close()
	return err
}

func (r *ConnRequest) sendReply(reply *mpa.Startup) error {
	frame, err := reply.Append(nil)
	if err != nil {
		return err
	}
	r.tc.SetWriteDeadline(time.Now().Add(r.l.cfg.StartupTimeout))
	if _, err := r.tc.Write(frame); err != nil {
		return fmt.Errorf("iwarp: sending MPA Reply: %w", err)
	}
	return nil
}

// Refused is how many connections the Listener closed at once because too
// many others had not yet sent their MPA Request (ConnConfig.MaxStartups).
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// peerIP is the IP address of a, as a string (all of a when it has none).
func peerIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}
