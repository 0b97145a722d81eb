package metrics

import (
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/prometheus/client_golang/prometheus"
)

// Initiator is the metrics of a long-running ddpinitiator (a mount or an
// attachment's daemon): one Observer per session, each labelled with its
// target.
type Initiator struct {
	// Registry holds the ddpinitiator_ metrics and the Go runtime's and the
	// process's (go_, process_).
	Registry *prometheus.Registry

	// RNIC exports the counters of the process's RNIC once Set.
	RNIC *RNIC

	io         ioVecs
	lost       *prometheus.CounterVec
	reconnects *prometheus.CounterVec
}

// NewInitiator returns the metrics of an initiator process.
func NewInitiator() *Initiator {
	m := &Initiator{
		Registry: newRegistry(),
		io:       newIOVecs("ddpinitiator", "completed"),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ddpinitiator_connection_losses_total",
			Help: "Connections of a session that failed (each starts a recovery), by target.",
		}, []string{"target"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ddpinitiator_reconnects_total",
			Help: "Recoveries that logged in again on a new connection and reissued the session's commands, by target.",
		}, []string{"target"}),
	}
	m.RNIC = newRNIC("ddpinitiator")
	m.io.register(m.Registry)
	m.Registry.MustRegister(m.lost, m.reconnects, m.RNIC)
	return m
}

// Session is the initiator.Observer of one session with the target named
// target.
type Session struct {
	m          *Initiator
	target     string
	luns       cache[uint16, lunSeries]
	lost       prometheus.Counter
	reconnects prometheus.Counter
}

var _ initiator.Observer = (*Session)(nil)

// Session returns the Observer of a session with target; its series
// exist, at zero, from now on.
func (m *Initiator) Session(target string) *Session {
	return &Session{m: m, target: target,
		lost: m.lost.WithLabelValues(target), reconnects: m.reconnects.WithLabelValues(target)}
}

// AddLUN creates the series of a LUN at zero.
func (s *Session) AddLUN(lun uint16) { s.lun(lun) }

func (s *Session) lun(lun uint16) *lunSeries {
	if l := s.luns.load(lun); l != nil {
		return l
	}
	return s.luns.add(lun, func() *lunSeries { return s.m.io.series(s.target, uint64(lun)) })
}

// Command implements initiator.Observer: it allocates nothing once the
// LUN has been seen.
func (s *Session) Command(c initiator.CommandInfo) {
	s.lun(c.LUN).observe(c.Opcode, c.Status, c.DataIn, c.DataOut, c.Latency.Seconds())
}

// ConnectionLost implements initiator.Observer.
func (s *Session) ConnectionLost() { s.lost.Inc() }

// Reconnected implements initiator.Observer.
func (s *Session) Reconnected() { s.reconnects.Inc() }

// Counts returns the I/O counts of a LUN of the session.
func (s *Session) Counts(lun uint16) IOCounts {
	l := s.luns.load(lun)
	if l == nil {
		return IOCounts{}
	}
	return l.counts()
}
