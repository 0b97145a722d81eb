package metrics

import (
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/target"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Target is ddptarget's metrics: a target.Observer whose counts go to
// Registry.
type Target struct {
	// Registry holds the ddptarget_ metrics and the Go runtime's and the
	// process's (go_, process_).
	Registry *prometheus.Registry

	// RNIC exports the counters of the daemon's RNIC once Set.
	RNIC *RNIC

	sessions          *prometheus.GaugeVec
	normal, discovery prometheus.Gauge
	connections       prometheus.Gauge
	io                ioVecs
	luns              cache[lunKey, lunSeries]
	rejects           [256]prometheus.Counter
}

type lunKey struct {
	target string
	lun    uint64
}

var _ target.Observer = (*Target)(nil)

// Reject reason label values by RFC 7143 section 11.17.1 reason code; 0 is
// not a Reject but a connection dropped for a protocol error.
var rejectReasons = map[uint8]string{
	0:                               "connection_dropped",
	iscsi.RejectDigestError:         "data_digest_error",
	iscsi.RejectSNACK:               "snack_reject",
	iscsi.RejectProtocolError:       "protocol_error",
	iscsi.RejectCommandNotSupported: "command_not_supported",
	iscsi.RejectImmediateCommand:    "immediate_command_reject",
	iscsi.RejectTaskInProgress:      "task_in_progress",
	iscsi.RejectInvalidDataAck:      "invalid_data_ack",
	iscsi.RejectInvalidPDUField:     "invalid_pdu_field",
	iscsi.RejectOutOfResources:      "long_operation_reject",
	0x0b:                            "negotiation_reset",
	iscsi.RejectWaitingForLogout:    "waiting_for_logout",
}

// RejectReason returns the reason label of a Reject reason code: its RFC
// 7143 name, or "other".
func RejectReason(code uint8) string {
	if n, ok := rejectReasons[code]; ok {
		return n
	}
	return "other"
}

// NewTarget returns the metrics of a target, every series it knows ahead
// (sessions, connections, rejects) at zero.
func NewTarget() *Target {
	t := &Target{
		Registry: newRegistry(),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ddptarget_sessions",
			Help: "Connections in full feature phase, by session kind (normal, discovery).",
		}, []string{"kind"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ddptarget_connections",
			Help: "Connections accepted and not yet ended (in login or full feature phase).",
		}),
		io: newIOVecs("ddptarget", "answered"),
	}
	rejects := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ddptarget_rejects_total",
		Help: "PDUs answered with a Reject, by RFC 7143 reason; connection_dropped counts connections dropped for a protocol error.",
	}, []string{"reason"})
	other := rejects.WithLabelValues("other")
	for i := range t.rejects {
		t.rejects[i] = other
	}
	for code, name := range rejectReasons {
		t.rejects[code] = rejects.WithLabelValues(name)
	}
	t.normal = t.sessions.WithLabelValues("normal")
	t.discovery = t.sessions.WithLabelValues("discovery")
	t.RNIC = newRNIC("ddptarget")
	t.Registry.MustRegister(t.sessions, t.connections, rejects, t.RNIC)
	t.io.register(t.Registry)
	return t
}

// AddLUN creates the series of a target's LUN at zero, so that a scrape
// shows it before its first command.
func (t *Target) AddLUN(target string, lun uint64) { t.lun(target, lun) }

func (t *Target) lun(target string, lun uint64) *lunSeries {
	k := lunKey{target, lun}
	if s := t.luns.load(k); s != nil {
		return s
	}
	return t.luns.add(k, func() *lunSeries { return t.io.series(target, lun) })
}

// Connection implements target.Observer.
func (t *Target) Connection(delta int) { t.connections.Add(float64(delta)) }

// Session implements target.Observer.
func (t *Target) Session(kind string, delta int) {
	var g prometheus.Gauge
	switch kind {
	case "Normal":
		g = t.normal
	case "Discovery":
		g = t.discovery
	default:
		g = t.sessions.WithLabelValues(kind)
	}
	g.Add(float64(delta))
}

// Command implements target.Observer: it allocates nothing once the
// command's target and LUN have been seen.
func (t *Target) Command(c target.CommandInfo) {
	t.lun(c.Target, c.LUN).observe(c.Opcode, c.Status, c.DataIn, c.DataOut, c.Latency.Seconds())
}

// Rejected implements target.Observer.
func (t *Target) Rejected(reason uint8) { t.rejects[reason].Inc() }

// IOCounts are what a LUN has done since the process started.
type IOCounts struct {
	Commands     uint64 `json:"commands"`
	Reads        uint64 `json:"reads"`  // commands of the read group
	Writes       uint64 `json:"writes"` // commands of the write group
	Errors       uint64 `json:"errors"` // commands answered with a status other than GOOD
	ReadBytes    uint64 `json:"read_bytes"`
	WrittenBytes uint64 `json:"written_bytes"`
}

// Counts returns the I/O counts of a target's LUN (zero for one never
// seen). It reads the counters; it is not for the data path.
func (t *Target) Counts(target string, lun uint64) IOCounts {
	s := t.luns.load(lunKey{target, lun})
	if s == nil {
		return IOCounts{}
	}
	return s.counts()
}

func (s *lunSeries) counts() IOCounts {
	var c IOCounts
	for o := range s.commands {
		for st := range s.commands[o] {
			n := counterValue(s.commands[o][st])
			c.Commands += n
			switch {
			case o == opRead:
				c.Reads += n
			case o == opWrite:
				c.Writes += n
			}
			if st != stGood {
				c.Errors += n
			}
		}
	}
	c.ReadBytes = counterValue(s.read)
	c.WrittenBytes = counterValue(s.written)
	return c
}

func counterValue(c prometheus.Counter) uint64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil || m.Counter == nil {
		return 0
	}
	return uint64(m.Counter.GetValue())
}
