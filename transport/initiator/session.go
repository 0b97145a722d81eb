// Package initiator is the iSER initiator: it connects to a target over the
// software RNIC, logs in (package login), and runs SCSI commands whose data
// buffers are registered memory the target reads (RDMA Read, for writes) and
// writes (RDMA Write, for reads) directly (RFC 7145 section 7.3).
package initiator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/bufpool"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	log "github.com/sirupsen/logrus"
)

// Config describes a session. Zero fields take the defaults.
type Config struct {
	InitiatorName string
	// TargetName is the target to log in to; empty for a discovery session.
	TargetName string
	CHAP       *login.CHAP
	// ISID is the initiator part of the session identifier (48 bits);
	// a random one when 0.
	ISID uint64
	// QueueDepth bounds the commands in flight (default 128); the
	// target's MaxCmdSN may bound them further.
	QueueDepth int
	// Buffers is the size of the registered region that Alloc hands out
	// data buffers from (default 64 MiB, faulted in as used).
	Buffers int
	// Conn is the MPA configuration of the connection. Its ReadSpin also
	// sets the iSCSI/TCP reader's spin (tcpconn.Reader.Spin).
	Conn iwarp.ConnConfig
	// NopInterval: a NOP-Out ping after this long without hearing from the
	// target; NopTimeout: how long to wait for its answer before the
	// connection is declared dead (defaults 5 s and 15 s; negative
	// disables pings).
	NopInterval, NopTimeout time.Duration
	// RecoveryTimeout, when positive, makes the session survive a lost
	// connection: it reconnects with back-off, logs in again and reissues
	// every command that had not completed, in their original order;
	// callers see an error only if that takes longer than this. 0: a lost
	// connection ends the session.
	RecoveryTimeout time.Duration
	// NoImmediateData offers ImmediateData=No: all write data then moves
	// by RDMA Read (iSER) or answers R2Ts (iSCSI/TCP).
	NoImmediateData bool
	// HeaderDigest and DataDigest offer CRC32C digests on an iSCSI/TCP
	// connection (network NetworkISCSITCP; RFC 7143 section 13.1). iSER
	// has none.
	HeaderDigest, DataDigest bool
	// Alternates are other portals of the same target: other gateways of
	// a shared disk (several ddptarget processes over one image, with
	// ALUA), or other addresses of one. When the current portal cannot be
	// reached, at Dial and while recovering a lost connection, the
	// session tries the next one in turn and stays on the first that
	// answers; the commands outstanding are reissued there
	// (active/passive failover).
	Alternates []string
	// RoundRobin, with Alternates, keeps a session to every portal at
	// once and sends each command down the next of them, among the paths
	// whose ALUA state is active/optimized (active/non-optimized when
	// none is); a path that fails hands its commands to the others and
	// is dialed again in the background. Without it the session uses one
	// portal at a time (Alternates).
	RoundRobin bool
	// LoginTimeout bounds the login (default 15 s).
	LoginTimeout time.Duration
	// Observer, when set, is told of commands and reconnections (metrics).
	Observer Observer
	Log      *log.Entry

	// A path of a round-robin session: the buffer region it shares with
	// the others, and failFast, which says whether another path is up to
	// take its commands when its connection is lost.
	region   *mem.Mapping
	pool     *bufpool.Pool // region's allocator, shared with the other paths
	failFast func() bool
}

func (c *Config) setDefaults() error {
	if c.InitiatorName == "" {
		return errors.New("initiator: no InitiatorName")
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = 128
	}
	if c.QueueDepth < 1 || c.QueueDepth > 4096 {
		return fmt.Errorf("initiator: queue depth %d outside 1..4096", c.QueueDepth)
	}
	if c.Buffers == 0 {
		c.Buffers = 64 << 20
	}
	if c.NopInterval == 0 {
		c.NopInterval = 5 * time.Second
	}
	if c.NopTimeout == 0 {
		c.NopTimeout = 15 * time.Second
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = 15 * time.Second
	}
	if c.Log == nil {
		c.Log = log.NewEntry(log.StandardLogger())
	}
	return nil
}

// maxLosses is how many lost connections a command is reissued after.
const maxLosses = 4

// extra task records beyond the queue depth: the ping, task management,
// text and logout requests.
const extra = 8

const loginData = 8192

// ErrSessionClosed is returned for commands on a session that has ended.
var ErrSessionClosed = errors.New("initiator: session closed")

// ErrReconnecting is returned for task management, pings and text
// requests made while the session is reconnecting (SCSI commands wait).
var ErrReconnecting = errors.New("initiator: session reconnecting")

// Session is one iSER session (one connection) to a target.
type Session struct {
	cfg     Config
	dev     *iwarp.Device
	network string
	portals []string     // addr, then Config.Alternates
	cur     atomic.Int32 // the portal in use (or being tried)
	bufs    *mem.Mapping // the data buffers, registered in every connection
	ownBufs bool         // bufs is the session's own (not a round-robin session's)
	mp      *multipath   // round-robin mode (Config.RoundRobin): the paths do the work
	tr      transport    // the current connection
	pool    *bufpool.Pool
	base    uintptr // first octet of the buffer region
	log     *log.Entry

	res    login.Result
	params login.Params
	maxImm int // the most immediate data a write carries

	mu    sync.Mutex
	cond  *sync.Cond // window opened, task freed, or session ended
	cmdSN uint32
	// alone counts the commands sent in a row with none other in
	// flight: from two on, their caller is taken to be waiting on each
	// (queue depth 1), and its answer is awaited (transport.awaitAnswer).
	alone    int
	maxCmdSN uint32
	reserved uint32 // windowed requests taken but not yet given a CmdSN
	expStat  uint32
	tasks    []task
	free     []int32
	err      error // why the session ended
	loginCh  chan []byte
	// recovering: the connection was lost and a new one is being made;
	// recoverBy is when the session gives up.
	recovering bool
	recoverBy  time.Time
	lostAt     time.Time     // when the connection being recovered was lost
	lostOn     int32         // the portal it was lost on
	ended      chan struct{} // closed when the current connection's loop has ended
	loggedOut  bool          // the target accepted our Logout: its close ends the session

	ffp     atomic.Bool // login done: the loop may ping
	lastRx  time.Time
	pingOut time.Time
	done    chan struct{}
	wake    chan bool
	stopped sync.Once
}

// task is one outstanding request.
type task struct {
	gen      uint16
	busy     bool
	sent     bool  // its Send completed
	replied  bool  // its answer arrived
	released bool  // its requester is done with it
	reissue  bool  // to be sent again on the next connection
	losses   uint8 // connections lost while it was outstanding
	reserved bool  // holds a place in the command window (s.reserved)
	err      error // the command could not be sent (finish returns it)
	off      int   // the data buffer's offset in the region
	lun      iscsi.LUN
	cmdSN    uint32 // CmdSN it was last sent with (reissue order)
	via      int32  // the portal whose connection brought the answer
	done     chan struct{}
	cmd      *Command
	resp     [iscsi.BHSLen]byte
	data     []byte // answer data segment (text, NOP-In), copied
	sense    [128]byte
}

// Dial connects to the target at addr, logs in and returns the session.
// network is an iwarp network for iSER ("tcp": MPA over TCP, "sctp",
// "sctp-udp") or NetworkISCSITCP for iSCSI over plain TCP, which needs no
// dev.
func Dial(ctx context.Context, dev *iwarp.Device, network, addr string, cfg Config) (*Session, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if ps := portalList(addr, cfg.Alternates); cfg.RoundRobin && len(ps) > 1 {
		return dialMultipath(ctx, dev, network, ps, cfg)
	}
	s := &Session{cfg: cfg, dev: dev, network: network, portals: portalList(addr, cfg.Alternates), log: cfg.Log.WithField("target", addr),
		done: make(chan struct{}), wake: make(chan bool), loginCh: make(chan []byte, 1)}
	s.cond = sync.NewCond(&s.mu)
	n := cfg.QueueDepth + extra + 1 // the last record is the login's
	var err error
	if s.bufs = cfg.region; s.bufs == nil {
		if s.bufs, err = mem.AnonymousLazy(cfg.Buffers); err != nil {
			return nil, fmt.Errorf("initiator: buffer region of %d octets: %w", cfg.Buffers, err)
		}
		s.ownBufs = true
	}
	if s.pool = cfg.pool; s.pool == nil {
		s.pool, _ = bufpool.New(cfg.Buffers, 4096)
	}
	s.base = uintptr(unsafe.Pointer(&s.bufs.Bytes()[0]))
	s.tasks = make([]task, n)
	for i := n - 1; i >= 0; i-- {
		s.tasks[i].done = make(chan struct{}, 1)
		if i != n-1 {
			s.free = append(s.free, int32(i))
		}
	}
	// Each portal once, until one answers; the first one's error if none
	// does, with the others'.
	var first error
	var others []string
	for range s.portals {
		if s.tr, err = s.connect(ctx); err == nil || ctx.Err() != nil {
			break
		}
		if first == nil {
			first = err
		} else {
			others = append(others, err.Error())
		}
		s.cur.Store((s.cur.Load() + 1) % int32(len(s.portals)))
	}
	if err != nil {
		s.closeBufs()
		if len(others) > 0 {
			return nil, fmt.Errorf("%w (and its other portals: %s)", first, strings.Join(others, "; "))
		}
		return nil, first
	}
	if first != nil {
		s.log.Warnf("initiator: %s cannot be reached (%v); logging in at %s", addr, first, s.Portal())
	}
	s.ended = make(chan struct{})
	s.lastRx = time.Now()
	go s.supervise()
	lctx, cancel := context.WithTimeout(ctx, cfg.LoginTimeout)
	defer cancel()
	if err := s.login(lctx, s.tr, s.ended); err != nil {
		s.shutdown(err)
		<-s.done
		s.tr.close()
		s.closeBufs()
		return nil, err
	}
	return s, nil
}

// connect makes a connection to the target at the current portal, ready
// for login.
func (s *Session) connect(ctx context.Context) (transport, error) {
	addr := s.Portal()
	if s.network == NetworkISCSITCP {
		t, err := s.connectTCP(ctx, addr)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	t, err := s.connectISER(ctx, addr)
	if err != nil {
		if errors.Is(err, iwarp.ErrNoMPAReply) && errors.Is(err, os.ErrDeadlineExceeded) {
			// An iSCSI/TCP target waits for a Login Request and says
			// nothing to an MPA Request.
			return nil, fmt.Errorf("%w (is %s an iSCSI/TCP portal? that is transport iscsi-tcp)", err, addr)
		}
		return nil, err
	}
	return t, nil
}

// portalList is addr followed by the alternates that differ from it, each
// once.
func portalList(addr string, alternates []string) []string {
	ps := []string{addr}
	for _, a := range alternates {
		if !slices.Contains(ps, a) {
			ps = append(ps, a)
		}
	}
	return ps
}

// Portal returns the portal the session uses, or is trying to reach while
// it recovers a lost connection.
func (s *Session) Portal() string { return s.portals[s.cur.Load()] }

// Portals returns every portal the session may use: the one it dialed,
// then its alternates.
func (s *Session) Portals() []string { return slices.Clone(s.portals) }

// nextPortal moves on to the next portal after the current one could not
// be reached (err), when there is another.
func (s *Session) nextPortal(err error) {
	if len(s.portals) < 2 {
		return
	}
	from := s.Portal()
	s.cur.Store((s.cur.Load() + 1) % int32(len(s.portals)))
	s.log.Warnf("initiator: %s cannot be reached (%v); trying %s", from, err, s.Portal())
}

// Params returns the negotiated operational parameters.
func (s *Session) Params() login.Params {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.params
}

// Result returns the login's outcome (names, ISID, TSIH).
func (s *Session) Result() login.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// Alloc returns a registered data buffer of n octets (page aligned), or an
// error when the session's region has no run that long free now.
func (s *Session) Alloc(n int) ([]byte, error) {
	off, ok := s.pool.Get(n)
	if !ok {
		return nil, fmt.Errorf("initiator: no free buffer of %d octets (region %d, free %d)", n, s.pool.Size(), s.pool.Free())
	}
	return s.bufs.Bytes()[off : off+n : off+n], nil
}

// Free returns a buffer from Alloc.
func (s *Session) Free(b []byte) {
	if off, ok := s.offset(b); ok {
		s.pool.Put(off, cap(b))
	}
}

// offset finds b in the buffer region.
func (s *Session) offset(b []byte) (int, bool) {
	if cap(b) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < s.base || p+uintptr(cap(b)) > s.base+uintptr(s.bufs.Len()) {
		return 0, false
	}
	return int(p - s.base), true
}

// Err returns why the session ended, or nil while it is up.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// shutdown ends the session with err: waiters fail, the loop stops.
func (s *Session) shutdown(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cond.Broadcast()
	s.stopped.Do(func() { close(s.wake) })
}

// Close logs out (when the session is up) and releases everything.
func (s *Session) Close() error {
	if s.mp != nil {
		return s.mp.close(s)
	}
	if s.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.Logout(ctx)
		cancel()
		if err != nil {
			s.log.Debugf("initiator: logout: %v", err)
		}
	}
	s.shutdown(ErrSessionClosed)
	<-s.done
	s.mu.Lock()
	tr := s.tr
	s.mu.Unlock()
	err := tr.close()
	if e := s.closeBufs(); e != nil && err == nil {
		err = e
	}
	return err
}

// closeBufs unmaps the buffer region if it is the session's own.
func (s *Session) closeBufs() error {
	if !s.ownBufs {
		return nil
	}
	return s.bufs.Close()
}

// supervise runs the current connection's completion loop; when the
// connection is lost it recovers (RecoveryTimeout) or ends the session.
func (s *Session) supervise() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	s.mu.Lock()
	tr, ended := s.tr, s.ended
	s.mu.Unlock()
	const firstBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := firstBackoff
	up := time.Now() // when the current connection was made
	for {
		err := tr.run(s.wake, tick.C)
		close(ended)
		tr.abort()
		s.mu.Lock()
		if errors.Is(err, errStopped) || s.loggedOut {
			err = ErrSessionClosed
		}
		s.mu.Unlock()
		recover, handedBack := s.startRecovery(err)
		if !recover {
			s.end(err)
			return
		}
		oldClosed := false
		if len(handedBack) > 0 {
			// A round-robin path gives its commands back to be sent on
			// another path: only once this connection can no longer
			// place into or read from their buffers.
			tr.close()
			oldClosed = true
			s.handBack(handedBack)
		}
		// A connection that lasted is a new loss, not the same outage:
		// back off from the start again (else every loss after the sixth
		// waited the longest back-off, however far apart they came).
		if time.Since(up) > maxBackoff {
			backoff = firstBackoff
		}
		for {
			if !s.sleep(backoff) {
				s.end(ErrSessionClosed)
				return
			}
			backoff = min(2*backoff, maxBackoff)
			s.mu.Lock()
			late := time.Now().After(s.recoverBy)
			s.mu.Unlock()
			if late {
				s.end(fmt.Errorf("initiator: could not reconnect within %v: %w", s.cfg.RecoveryTimeout, err))
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LoginTimeout)
			nc, cerr := s.connect(ctx)
			cancel()
			if cerr != nil {
				s.log.Debugf("initiator: reconnecting: %v", cerr)
				s.nextPortal(cerr)
				continue
			}
			old := tr
			up = time.Now()
			ended = make(chan struct{})
			s.mu.Lock()
			s.tr, s.ended = nc, ended
			s.mu.Unlock()
			if !oldClosed {
				old.close()
			}
			tr = nc
			// Log in and reissue while the loop runs the new connection.
			go func() {
				if err := s.relogin(); err != nil {
					s.log.Warnf("initiator: login after reconnecting: %v", err)
					nc.abort()
				}
			}()
			break
		}
	}
}

// startRecovery decides whether to recover from the loss of a connection
// (err) and, the first time, marks every unanswered SCSI command to be
// sent again.
func (s *Session) startRecovery(err error) (recover bool, handedBack []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.loggedOut || s.cfg.RecoveryTimeout <= 0 || !s.ffp.Load() && !s.recovering {
		return false, nil
	}
	s.ffp.Store(false)
	// A path of a round-robin session gives its commands back when another
	// path is up, rather than holding them for its own recovery.
	handBack := s.cfg.failFast != nil && s.cfg.failFast()
	if !s.recovering {
		s.recovering = true
		s.lostAt, s.lostOn = time.Now(), s.cur.Load()
		s.recoverBy = s.lostAt.Add(s.cfg.RecoveryTimeout)
		s.log.Warnf("initiator: connection lost (%v); reconnecting for up to %v", err, s.cfg.RecoveryTimeout)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.ConnectionLost()
	}
	for i := range s.tasks {
		t := &s.tasks[i]
		if !t.busy || t.replied || t.reserved || i == len(s.tasks)-1 {
			// A reserved command is taken but not posted yet: its post
			// sees the recovery and leaves it to be reissued.
			continue
		}
		t.sent = true // the old connection will not complete it
		if t.cmd != nil && !handBack {
			if t.losses++; t.losses <= maxLosses {
				t.reissue = true
				continue
			}
			// It was outstanding each time the connection went: the
			// command itself may be what ends it (a target that drops
			// any command over its buffer size). It fails rather than
			// going round for ever.
			t.err = fmt.Errorf("initiator: %d connections lost while opcode %#02x was outstanding; giving it up", t.losses, t.cmd.CDB[0])
		} else if t.cmd != nil {
			handedBack = append(handedBack, int32(i))
			continue
		}
		// Task management, pings, text, logout: fail them.
		t.replied = true
		select {
		case t.done <- struct{}{}:
		default:
		}
		if t.released {
			s.putLocked(int32(i))
		}
	}
	return true, handedBack
}

// handBack ends the commands of tasks tis with errPathLost: their
// round-robin session sends them on another path.
func (s *Session) handBack(tis []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ti := range tis {
		t := &s.tasks[ti]
		t.err, t.replied = errPathLost, true
		select {
		case t.done <- struct{}{}:
		default:
		}
	}
}

// relogin logs in on the new connection and reissues the commands.
func (s *Session) relogin() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LoginTimeout)
	defer cancel()
	s.mu.Lock()
	tr, ended := s.tr, s.ended
	s.mu.Unlock()
	if err := s.login(ctx, tr, ended); err != nil {
		return err
	}
	s.waitTime2Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var pending []int32
	for i := range s.tasks {
		if t := &s.tasks[i]; t.busy && t.reissue && !t.replied {
			pending = append(pending, int32(i))
		}
	}
	sort.Slice(pending, func(a, b int) bool {
		return int32(s.tasks[pending[a]].cmdSN-s.tasks[pending[b]].cmdSN) < 0
	})
	s.recovering = false
	s.recoverBy = time.Time{}
	for _, ti := range pending {
		t := &s.tasks[ti]
		t.reissue, t.sent = false, false
		t.gen++
		s.sendCommandLocked(ti) // a failure leaves it for the next connection
	}
	s.log.Infof("initiator: reconnected; %d commands reissued", len(pending))
	if s.cfg.Observer != nil {
		s.cfg.Observer.Reconnected()
	}
	s.cond.Broadcast()
	return nil
}

// waitTime2Wait holds the reissue of commands that change the medium on
// another portal (a failover to another gateway) until DefaultTime2Wait
// has passed since the connection was lost (RFC 7143 13.15): the old
// gateway may still be executing a write it had all the data of, and a
// copy reissued sooner through another gateway could land before it, its
// stale data then overwriting the reissued command's, or a later write's.
// Back on the same portal the target itself orders the old connection's
// tasks before the new session's; reads never wait.
func (s *Session) waitTime2Wait() {
	s.mu.Lock()
	if s.cur.Load() == s.lostOn {
		s.mu.Unlock()
		return
	}
	writes := false
	for i := range s.tasks {
		if t := &s.tasks[i]; t.busy && t.reissue && !t.replied && t.cmd != nil && t.cmd.Dir == DataOut {
			writes = true
		}
	}
	until := s.lostAt.Add(time.Duration(s.params.DefaultTime2Wait) * time.Second)
	s.mu.Unlock()
	if d := time.Until(until); writes && d > 0 {
		s.log.Infof("initiator: holding the writes to reissue for DefaultTime2Wait (%v)", d.Round(time.Millisecond))
		s.sleep(d)
	}
}

// sleep waits d, or returns false when the session is being closed.
func (s *Session) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case _, ok := <-s.wake:
		return ok
	}
}

// end ends the session with err and fails every request still waiting.
func (s *Session) end(err error) {
	s.shutdown(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.tasks {
		t := &s.tasks[i]
		if t.busy && !t.replied {
			t.replied, t.sent = true, true
			select {
			case t.done <- struct{}{}:
			default:
			}
		}
	}
}
