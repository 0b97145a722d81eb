// Package target is the iSER target: it accepts iSER connections on the
// software RNIC, runs the iSCSI login (package login), and executes SCSI
// commands on the exported LUs (package lu), moving read data by RDMA Write
// straight from the backing store and write data by RDMA Read into a
// registered staging region (RFC 7145 sections 7.3 and 7.4).
package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	log "github.com/sirupsen/logrus"
)

// Export is one target the server offers: its LUs and who may log in.
type Export struct {
	Target *lu.Target
	// Initiators lists the InitiatorNames allowed in; empty allows anyone.
	Initiators []string
	// CHAP, when set, is required of initiators (one-way, or mutual when
	// its Mutual fields are set).
	CHAP *login.CHAP
	// Alias is the TargetAlias sent at login.
	Alias string
	// NoImmediateData makes the target offer ImmediateData=No in the
	// logins of this target's Normal sessions (RFC 7143 section 13.11;
	// the default offer is Yes): initiators then send no data with their
	// commands, and all write data is fetched by RDMA Read (iSER) or
	// solicited by R2T (iSCSI/TCP). For initiators whose immediate data
	// cannot be trusted (docs/interop.md: libiscsi 1.19's iSER announces
	// immediate data it does not send).
	NoImmediateData bool
}

// Config is the target's configuration. Zero fields take the defaults.
type Config struct {
	Exports []Export
	// Discovery, when set, is the CHAP that discovery sessions must pass.
	Discovery *login.CHAP
	// Portals are the addresses SendTargets reports (the listeners').
	Portals []login.Portal
	// MaxSessions bounds the connections served at once (default 64);
	// more are refused at the MPA exchange.
	MaxSessions int
	// MaxLoggingIn bounds the connections whose login has not completed
	// (default 16), MaxLoggingInPerPeer those from one IP address (default
	// 4): beyond them a new connection is closed at once, with a log line
	// at most once a second. LoginTimeout is how long a connection may take
	// to complete its login (default 15 s). Together they keep a flood of
	// connections that never log in from using up the sessions, file
	// descriptors and memory of everyone else.
	MaxLoggingIn, MaxLoggingInPerPeer int
	LoginTimeout                      time.Duration
	// QueueDepth is the commands each session may have outstanding: the
	// CmdSN window (default 128).
	QueueDepth int
	// TCPReadSpin, when positive, is how long an iSCSI/TCP connection's
	// reader polls for the next PDU before it sleeps in the poller (what
	// iwarp.ConnConfig.ReadSpin is for iSER; ddptarget uses
	// iwarp.DefaultReadSpin for both). 0 never spins.
	TCPReadSpin time.Duration
	// RecvDataSegment is the TargetRecvDataSegmentLength offered: the
	// largest immediate data, and the size of each receive buffer's data
	// part (default 8192, RFC 7145's default).
	RecvDataSegment int
	// FirstBurst and MaxBurst are the FirstBurstLength and MaxBurstLength
	// offered (defaults 64 KiB and 1 MiB). Each RDMA Read of write data is
	// at most MaxBurst octets.
	FirstBurst, MaxBurst int
	// Staging is each connection's registered region for write data
	// (default 64 MiB, faulted in as used); no single command may carry
	// more data than this.
	Staging int
	// NopInterval is how long a session may stay silent before the target
	// sends a NOP-In ping; NopTimeout how long it waits for the answer
	// before dropping the connection (defaults 5 s and 15 s; negative
	// disables pings).
	NopInterval, NopTimeout time.Duration
	// Observer, when set, is told of connections, sessions and commands
	// (metrics).
	Observer Observer
	// Log receives the target's log; logrus's standard logger when nil.
	Log *log.Entry
}

func (c *Config) setDefaults() error {
	if c.QueueDepth == 0 {
		c.QueueDepth = 128
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = 64
	}
	if c.MaxLoggingIn == 0 {
		c.MaxLoggingIn = 16
	}
	if c.MaxLoggingInPerPeer == 0 {
		c.MaxLoggingInPerPeer = 4
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = 15 * time.Second
	}
	if c.RecvDataSegment == 0 {
		c.RecvDataSegment = 8192
	}
	if c.FirstBurst == 0 {
		c.FirstBurst = 64 << 10
	}
	if c.MaxBurst == 0 {
		c.MaxBurst = 1 << 20
	}
	if c.Staging == 0 {
		c.Staging = 64 << 20
	}
	if c.NopInterval == 0 {
		c.NopInterval = 5 * time.Second
	}
	if c.NopTimeout == 0 {
		c.NopTimeout = 15 * time.Second
	}
	if c.Log == nil {
		c.Log = log.NewEntry(log.StandardLogger())
	}
	switch {
	case c.QueueDepth < 1 || c.QueueDepth > 4096:
		return fmt.Errorf("target: queue depth %d outside 1..4096", c.QueueDepth)
	case c.RecvDataSegment < 512 || c.RecvDataSegment > 1<<24-1:
		return fmt.Errorf("target: receive data segment length %d outside 512..16777215", c.RecvDataSegment)
	case c.FirstBurst < 512 || c.MaxBurst < c.FirstBurst || c.MaxBurst > 1<<24-1:
		return fmt.Errorf("target: burst lengths first %d max %d: need 512 <= first <= max < 2^24", c.FirstBurst, c.MaxBurst)
	case c.Staging < c.MaxBurst:
		return fmt.Errorf("target: staging %d smaller than MaxBurstLength %d", c.Staging, c.MaxBurst)
	}
	names := map[string]bool{}
	for _, e := range c.Exports {
		if e.Target == nil {
			return errors.New("target: export without a target")
		}
		if names[e.Target.Name()] {
			return fmt.Errorf("target: target %q exported twice", e.Target.Name())
		}
		names[e.Target.Name()] = true
	}
	return nil
}

// Server serves iSER connections for a set of exports.
type Server struct {
	dev      *iwarp.Device
	cfg      Config
	ex       atomic.Pointer[exports]
	draining atomic.Bool
	tsih     atomic.Uint32
	nexus    atomic.Uint64 // the last I_T nexus number given to a session

	mu        sync.Mutex
	conns     map[*conn]struct{}
	loggingIn int            // connections whose login has not completed
	perPeer   map[string]int // of those, by IP address
	refused   int            // connections refused since the last log line
	refusedAt time.Time      // when the last refusal was logged
	listeners map[io.Closer]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// NewServer returns a server for cfg's exports on dev.
func NewServer(dev *iwarp.Device, cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{dev: dev, cfg: cfg, conns: map[*conn]struct{}{}, listeners: map[io.Closer]struct{}{}, perPeer: map[string]int{}}
	s.ex.Store(newExports(0, cfg.Exports))
	return s, nil
}

// exports is one generation of the server's exports, replaced whole by
// SetExports.
type exports struct {
	gen      uint64
	list     []Export
	policies map[string]*login.TargetPolicy
	targets  map[string]*lu.Target
	// noImmediate names the targets that offer ImmediateData=No.
	noImmediate map[string]bool
}

func newExports(gen uint64, list []Export) *exports {
	ex := &exports{gen: gen, list: list, policies: map[string]*login.TargetPolicy{}, targets: map[string]*lu.Target{},
		noImmediate: map[string]bool{}}
	for _, e := range list {
		name := e.Target.Name()
		ex.policies[name] = &login.TargetPolicy{Name: name, Alias: e.Alias, Initiators: e.Initiators, CHAP: e.CHAP}
		ex.targets[name] = e.Target
		if e.NoImmediateData {
			ex.noImmediate[name] = true
		}
	}
	return ex
}

// SetExports replaces the exports (a configuration reload). New logins see
// them at once; within about a second every session adopts its target's
// new LUN map, and a session whose target is gone, whose initiator is no
// longer allowed or whose CHAP changed is dropped. Other sessions go on
// undisturbed.
func (s *Server) SetExports(list []Export) error {
	c := s.cfg
	c.Exports = list
	if err := c.setDefaults(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ex.Store(newExports(s.ex.Load().gen+1, list))
	return nil
}

// Serve accepts iSER connections on l until l or the server is closed.
// It returns nil after Close.
func (s *Server) Serve(l *iwarp.Listener) error {
	return s.serve(l, func() (func(*conn), string, func(), error) {
		req, err := l.Accept(context.Background())
		if err != nil {
			return nil, "", nil, err
		}
		return func(c *conn) { c.serveISER(req) }, req.RemoteAddr.String(), func() { req.Reject(nil) }, nil
	}, "iser")
}

// serve runs a listener's accept loop: accept returns how to serve the
// next connection, its peer's address, and how to refuse it.
func (s *Server) serve(l io.Closer, accept func() (serve func(*conn), peer string, refuse func(), err error), transport string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	for {
		serve, peer, refuse, err := accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed || s.draining.Load()
			delete(s.listeners, l)
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.start(serve, peer, refuse, transport)
	}
}

// start serves a new connection on its own goroutine, unless the server
// is closing or at its limit.
func (s *Server) start(serve func(*conn), peer string, refuse func(), transport string) {
	s.mu.Lock()
	if s.closed || s.draining.Load() {
		s.mu.Unlock()
		refuse()
		return
	}
	if len(s.conns) >= s.cfg.MaxSessions {
		s.mu.Unlock()
		s.cfg.Log.Warnf("target: refusing %s: already %d sessions (max_sessions)", peer, s.cfg.MaxSessions)
		refuse()
		return
	}
	ip := peerIP(peer)
	if s.loggingIn >= s.cfg.MaxLoggingIn || s.perPeer[ip] >= s.cfg.MaxLoggingInPerPeer {
		s.refused++
		if now := time.Now(); now.Sub(s.refusedAt) >= time.Second {
			s.cfg.Log.Warnf("target: refusing %s: %d connections have not logged in yet (%d from %s; limits %d and %d per address); %d refused since the last message",
				peer, s.loggingIn, s.perPeer[ip], ip, s.cfg.MaxLoggingIn, s.cfg.MaxLoggingInPerPeer, s.refused)
			s.refusedAt, s.refused = now, 0
		}
		s.mu.Unlock()
		refuse()
		return
	}
	s.loggingIn++
	s.perPeer[ip]++
	c := &conn{srv: s, log: s.cfg.Log.WithField("peer", peer), peerIP: ip, loggingIn: true, accepted: time.Now()}
	c.info.Store(&SessionInfo{Peer: peer, Transport: transport, Since: time.Now()})
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if c.obs = s.cfg.Observer; c.obs != nil {
			c.obs.Connection(1)
			defer c.obs.Connection(-1)
		}
		serve(c)
		s.mu.Lock()
		delete(s.conns, c)
		s.loggedInLocked(c)
		s.mu.Unlock()
	}()
}

// SessionList returns the connections being served, oldest first.
func (s *Server) SessionList() []SessionInfo {
	s.mu.Lock()
	list := make([]SessionInfo, 0, len(s.conns))
	for c := range s.conns {
		info := *c.info.Load()
		info.Commands, info.ReadBytes, info.WrittenBytes = c.ioCmds.Load(), c.ioRead.Load(), c.ioWritten.Load()
		info.PlacedBytes = c.ioPlaced.Load()
		list = append(list, info)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Since.Before(list[j].Since) })
	return list
}

// Sessions returns the number of connections being served.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Shutdown stops the listeners and lets every connection finish the
// commands it is executing, answer them, and close gracefully; when ctx
// ends first, the rest are dropped as Close does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close stops the listeners, drops every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// loggedIn takes c off the count of connections logging in: its login is
// complete, or it has ended.
func (s *Server) loggedIn(c *conn) {
	s.mu.Lock()
	s.loggedInLocked(c)
	s.mu.Unlock()
}

func (s *Server) loggedInLocked(c *conn) {
	if !c.loggingIn {
		return
	}
	c.loggingIn = false
	s.loggingIn--
	if s.perPeer[c.peerIP]--; s.perPeer[c.peerIP] <= 0 {
		delete(s.perPeer, c.peerIP)
	}
}

// peerIP is the address part of host:port.
func peerIP(peer string) string {
	if h, _, err := net.SplitHostPort(peer); err == nil {
		return h
	}
	return peer
}
