// Package initiator is the iSER initiator: it connects to a target over the
// software RNIC, logs in (package login), and runs SCSI commands whose data
// buffers are registered memory the target reads (RDMA Read, for writes) and
// writes (RDMA Write, for reads) directly (RFC 7145 section 7.3).
package initiator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/bufpool"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/iserconn"
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
	// Conn is the MPA configuration of the connection.
	Conn iwarp.ConnConfig
	// NopInterval: a NOP-Out ping after this long without hearing from the
	// target; NopTimeout: how long to wait for its answer before the
	// connection is declared dead (defaults 5 s and 15 s; negative
	// disables pings).
	NopInterval, NopTimeout time.Duration
	// NoImmediateData offers ImmediateData=No: all write data then moves
	// by RDMA Read.
	NoImmediateData bool
	// LoginTimeout bounds the login (default 15 s).
	LoginTimeout time.Duration
	Log          *log.Entry
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

// extra task records beyond the queue depth: the ping, task management,
// text and logout requests.
const extra = 8

const loginData = 8192

// ErrSessionClosed is returned for commands on a session that has ended.
var ErrSessionClosed = errors.New("initiator: session closed")

// Session is one iSER session (one connection) to a target.
type Session struct {
	cfg  Config
	dev  *iwarp.Device
	c    *iserconn.Conn
	pool *bufpool.Pool
	base uintptr // first octet of the buffer region
	log  *log.Entry

	res    login.Result
	params login.Params
	maxImm int // the most immediate data a write carries

	mu       sync.Mutex
	cond     *sync.Cond // window opened, task freed, or session ended
	cmdSN    uint32
	maxCmdSN uint32
	expStat  uint32
	tasks    []task
	free     []int32
	err      error // why the session ended
	loginCh  chan []byte

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
	sent     bool // its Send completed
	replied  bool // its answer arrived
	released bool // its requester is done with it
	done     chan struct{}
	cmd      *Command
	resp     [iscsi.BHSLen]byte
	data     []byte // answer data segment (text, NOP-In), copied
	sense    [128]byte
}

// Dial connects to the target at addr, logs in and returns the session.
func Dial(ctx context.Context, dev *iwarp.Device, network, addr string, cfg Config) (*Session, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, dev: dev, log: cfg.Log.WithField("target", addr),
		done: make(chan struct{}), wake: make(chan bool), loginCh: make(chan []byte, 1)}
	s.cond = sync.NewCond(&s.mu)
	n := cfg.QueueDepth + extra
	var err error
	s.c, err = iserconn.New(dev, iserconn.Config{
		RecvSlots: n, RecvData: loginData, SendSlots: n, SendData: loginData, SendWRs: n + extra,
		Extra: cfg.Buffers, ExtraAccess: mem.LocalWrite | mem.RemoteRead | mem.RemoteWrite,
	})
	if err != nil {
		return nil, err
	}
	s.pool, _ = bufpool.New(cfg.Buffers, 4096)
	s.base = uintptr(unsafe.Pointer(&s.c.ExtraMR().Bytes()[0]))
	s.tasks = make([]task, n)
	for i := n - 1; i >= 0; i-- {
		s.tasks[i].done = make(chan struct{}, 1)
		s.free = append(s.free, int32(i))
	}
	// The buffer region is registered once for the whole session, so the
	// target must not invalidate its STag: say so (RFC 7145 section 9.4).
	var pd [iser.CMHeaderLen]byte
	iser.CMFields{SendInvNotSupported: true}.Encode(pd[:])
	cc := cfg.Conn
	cc.PrivateData = append(append([]byte(nil), cc.PrivateData...), pd[:]...)
	if _, err := s.c.QP.Connect(ctx, network, addr, cc); err != nil {
		s.c.Close()
		return nil, fmt.Errorf("initiator: connecting to %s: %w", addr, err)
	}
	s.lastRx = time.Now()
	go s.loop()
	lctx, cancel := context.WithTimeout(ctx, cfg.LoginTimeout)
	defer cancel()
	if err := s.login(lctx); err != nil {
		s.shutdown(err)
		<-s.done
		s.c.Close()
		return nil, err
	}
	return s, nil
}

// Params returns the negotiated operational parameters.
func (s *Session) Params() login.Params { return s.params }

// Result returns the login's outcome (names, ISID, TSIH).
func (s *Session) Result() login.Result { return s.res }

// Alloc returns a registered data buffer of n octets (page aligned), or an
// error when the session's region has no run that long free now.
func (s *Session) Alloc(n int) ([]byte, error) {
	off, ok := s.pool.Get(n)
	if !ok {
		return nil, fmt.Errorf("initiator: no free buffer of %d octets (region %d, free %d)", n, s.pool.Size(), s.pool.Free())
	}
	return s.c.ExtraMR().Bytes()[off : off+n : off+n], nil
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
	if p < s.base || p+uintptr(cap(b)) > s.base+uintptr(s.c.ExtraMR().Len()) {
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
	return s.c.Close()
}

// loop polls the connection's completions until it ends.
func (s *Session) loop() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	err := s.c.Loop(context.Background(), s, s.wake, tick.C)
	if errors.Is(err, iserconn.ErrStopped) {
		err = ErrSessionClosed
	}
	s.shutdown(err)
	s.c.QP.Close()
	// Fail every request still waiting.
	s.mu.Lock()
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
	s.mu.Unlock()
}
