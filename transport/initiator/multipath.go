package initiator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/bufpool"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// errPathLost ends, in a path of a round-robin session, the commands that
// were outstanding when its connection was lost while another path was
// up: the round-robin session sends them again there at once rather than
// waiting for this path to come back.
var errPathLost = errors.New("initiator: path lost")

// multipath is a Session in round-robin mode (Config.RoundRobin): one
// session per portal (each a gateway of the target, with its own login,
// CmdSN window and connection), all over one registered buffer region, so
// that a buffer from Alloc can go down any path. Do sends each command on
// the next usable path of the best ALUA class (active/optimized, else
// active/non-optimized); a path whose connection is lost hands its
// outstanding commands back to be sent on another; a path that cannot be
// dialed, or whose session ended, is dialed again in the background.
type multipath struct {
	dev     *iwarp.Device
	network string
	cfg     Config // each path's: no alternates, no round-robin, the shared region
	portals []string
	region  *mem.Mapping

	mu     sync.Mutex
	paths  []*Session // nil while down
	groups []int32    // each path's target port group, -1 unknown
	states []int32    // each path's ALUA state (scsi.ALUA*); active/optimized when the target has no ALUA

	next   atomic.Uint32
	closed chan struct{}
	loops  sync.WaitGroup
}

// refreshEvery is how often the paths' ALUA states are asked again and
// the paths that are down dialed again.
const refreshEvery = 2 * time.Second

// dialMultipath is Dial in round-robin mode: it dials every portal and
// succeeds when one answers.
func dialMultipath(ctx context.Context, dev *iwarp.Device, network string, portals []string, cfg Config) (*Session, error) {
	region, err := mem.AnonymousLazy(cfg.Buffers)
	if err != nil {
		return nil, fmt.Errorf("initiator: buffer region of %d octets: %w", cfg.Buffers, err)
	}
	m := &multipath{dev: dev, network: network, portals: portals, region: region, closed: make(chan struct{}),
		paths: make([]*Session, len(portals)), groups: make([]int32, len(portals)), states: make([]int32, len(portals))}
	pool, _ := bufpool.New(cfg.Buffers, 4096)
	pc := cfg
	pc.RoundRobin, pc.Alternates, pc.region, pc.pool = false, nil, region, pool
	pc.failFast = m.anotherUp
	m.cfg = pc
	var errs []string
	for i, p := range portals {
		m.groups[i] = -1
		if err := m.dial(ctx, i); err != nil {
			errs = append(errs, err.Error())
			cfg.Log.Warnf("initiator: path %s: %v", p, err)
		}
	}
	first := m.firstUp()
	if first == nil {
		region.Close()
		return nil, fmt.Errorf("initiator: no path to %s answered: %s", cfg.TargetName, strings.Join(errs, "; "))
	}
	s := &Session{cfg: cfg, dev: dev, network: network, portals: portals, log: cfg.Log.WithField("target", portals[0]),
		done: make(chan struct{}), wake: make(chan bool), mp: m, bufs: region}
	s.cond = sync.NewCond(&s.mu)
	s.pool = pool // the paths' too: one allocator for the one region
	s.base = uintptr(unsafe.Pointer(&region.Bytes()[0]))
	s.res, s.params = first.Result(), first.Params()
	m.loops.Add(1)
	go m.tend(s)
	return s, nil
}

// dial logs path i in and learns its target port group.
func (m *multipath) dial(ctx context.Context, i int) error {
	dctx, cancel := context.WithTimeout(ctx, m.cfg.LoginTimeout)
	defer cancel()
	p, err := Dial(dctx, m.dev, m.network, m.portals[i], m.cfg)
	if err != nil {
		return err
	}
	group, state := m.probe(dctx, p)
	m.mu.Lock()
	m.paths[i], m.groups[i], m.states[i] = p, group, state
	m.mu.Unlock()
	return nil
}

// probe asks a path for its target port group (the Device Identification
// page's designator) and that group's state (REPORT TARGET PORT GROUPS) on
// the first LUN REPORT LUNS lists. A target without ALUA: -1,
// active/optimized.
func (m *multipath) probe(ctx context.Context, p *Session) (group, state int32) {
	buf, err := p.Alloc(4096)
	if err != nil {
		return -1, scsi.ALUAActiveOptimized
	}
	defer p.Free(buf)
	lun := uint16(0)
	rl := &Command{CDB: []byte{scsi.ReportLUNs, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, Dir: DataIn, Data: buf}
	if p.Do(ctx, rl) == nil && rl.Status == scsi.StatusGood && binary.BigEndian.Uint32(buf) >= 8 {
		lun = binary.BigEndian.Uint16(buf[8:]) & 0x3fff
	}
	vpd := &Command{LUN: lun, CDB: scsi.DeviceIdentificationCDB(256), Dir: DataIn, Data: buf[:256]}
	if p.Do(ctx, vpd) != nil || vpd.Status != scsi.StatusGood {
		return -1, scsi.ALUAActiveOptimized
	}
	g, ok := scsi.LocalPortGroup(buf[:256])
	if !ok {
		return -1, scsi.ALUAActiveOptimized
	}
	return int32(g), m.groupState(ctx, p, lun, g)
}

// groupState asks path p for the state of target port group g.
func (m *multipath) groupState(ctx context.Context, p *Session, lun uint16, g uint16) int32 {
	buf, err := p.Alloc(4096)
	if err != nil {
		return scsi.ALUAActiveOptimized
	}
	defer p.Free(buf)
	c := &Command{LUN: lun, CDB: scsi.ReportTargetPortGroupsCDB(4096), Dir: DataIn, Data: buf}
	if p.Do(ctx, c) != nil || c.Status != scsi.StatusGood {
		return scsi.ALUAActiveOptimized
	}
	gs, err := scsi.ParseTargetPortGroups(buf)
	if err != nil {
		return scsi.ALUAActiveOptimized
	}
	for _, x := range gs {
		if x.ID == g {
			return int32(x.State)
		}
	}
	return scsi.ALUAActiveOptimized
}

// tend dials the paths that are down again and asks the others for their
// ALUA state, every refreshEvery, until the session closes; it ends the
// session when every path has ended for good.
func (m *multipath) tend(s *Session) {
	defer m.loops.Done()
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-m.closed:
			return
		case <-t.C:
		}
		for i := range m.portals {
			m.mu.Lock()
			p := m.paths[i]
			m.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.LoginTimeout)
			switch {
			case p == nil:
				if err := m.dial(ctx, i); err == nil {
					s.log.Infof("initiator: path %s is up", m.portals[i])
				}
			case p.Err() != nil:
				m.mu.Lock()
				m.paths[i] = nil
				m.mu.Unlock()
				p.Close()
			case p.usable():
				_, state := m.probe(ctx, p)
				m.mu.Lock()
				m.states[i] = state
				m.mu.Unlock()
			}
			cancel()
		}
	}
}

// usable reports whether a path's session is logged in and not
// reconnecting. It takes no lock: a path calls its multipath's anotherUp
// with its own lock held.
func (s *Session) usable() bool {
	select {
	case <-s.done:
		return false
	default:
	}
	return s.ffp.Load()
}

// anotherUp reports whether a path is usable: a path that loses its
// connection (and so is not usable itself) then hands its commands back
// (errPathLost) instead of holding them for its own recovery.
func (m *multipath) anotherUp() bool {
	m.mu.Lock()
	paths := append([]*Session(nil), m.paths...)
	m.mu.Unlock()
	for _, p := range paths {
		if p != nil && p.usable() {
			return true
		}
	}
	return false
}

func (m *multipath) firstUp() *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.paths {
		if p != nil {
			return p
		}
	}
	return nil
}

// pick returns the next usable path of the best ALUA class, in turn.
func (m *multipath) pick() (int, *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.paths)
	start := int(m.next.Add(1))
	for _, class := range []int32{scsi.ALUAActiveOptimized, scsi.ALUAActiveNonOptimized} {
		for k := range n {
			i := (start + k) % n
			if p := m.paths[i]; p != nil && m.states[i] == class && p.usable() {
				return i, p
			}
		}
	}
	return -1, nil
}

// do runs cmd on the paths in turn: a path lost under it, or whose port
// turns out to be in standby or unavailable, hands it to the next.
func (m *multipath) do(ctx context.Context, s *Session, cmd *Command) error {
	for {
		i, p := m.pick()
		if p == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-m.closed:
				return ErrSessionClosed
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		s.cur.Store(int32(i))
		err := p.Do(ctx, cmd)
		switch {
		case errors.Is(err, errPathLost):
			if cmd.Dir == DataOut {
				// The lost path's target may still be executing it: wait
				// DefaultTime2Wait (RFC 7143 13.15) before sending it
				// elsewhere, or its stale copy could land after this one
				// or a later write.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-m.closed:
					return ErrSessionClosed
				case <-time.After(time.Duration(p.Params().DefaultTime2Wait) * time.Second):
				}
			}
			continue
		case err == nil && PortUnavailable(cmd.Status, cmd.Sense):
			m.mu.Lock()
			m.states[i] = int32(cmd.Sense[13] - 0x0b + scsi.ALUAStandby)
			m.mu.Unlock()
			if _, q := m.pick(); q != nil {
				continue
			}
		}
		return err
	}
}

// onePath runs f on a usable path, ErrReconnecting when none is.
func (m *multipath) onePath(f func(*Session) error) error {
	_, p := m.pick()
	if p == nil {
		return ErrReconnecting
	}
	return f(p)
}

// close closes every path and the region.
func (m *multipath) close(s *Session) error {
	s.shutdown(ErrSessionClosed)
	close(s.done)
	close(m.closed)
	m.loops.Wait()
	m.mu.Lock()
	paths := m.paths
	m.paths = nil
	m.mu.Unlock()
	for _, p := range paths {
		if p != nil {
			p.Close()
		}
	}
	return m.region.Close()
}

// Paths describes each path of a round-robin session (Config.RoundRobin):
// its portal, whether it is up, and its ALUA state; nil for a session in
// failover mode.
func (s *Session) Paths() []PathInfo {
	m := s.mp
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []PathInfo
	for i, p := range m.portals {
		up := m.paths != nil && m.paths[i] != nil && m.paths[i].usable()
		ps = append(ps, PathInfo{Portal: p, Up: up, State: scsi.ALUAStateName(byte(m.states[i]))})
	}
	return ps
}

// PathInfo is one path of a round-robin session.
type PathInfo struct {
	Portal string
	Up     bool
	State  string
}
