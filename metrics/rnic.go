package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/prometheus/client_golang/prometheus"
)

// RNIC exports the software RNIC's counters (iwarp.Device.Counters) as
// <prefix>_rdma_messages_total{direction, message},
// <prefix>_rdma_octets_total{direction},
// <prefix>_rdma_terminates_total{origin, layer, error}, and how the
// engine moved them: <prefix>_rdma_transmit_batches_total{writer},
// <prefix>_rdma_spin_caught_total and <prefix>_rdma_inline_total. It
// reads them at scrape time: the data path pays only the engine's own
// uncontended counter adds. Until Set, it exports nothing.
type RNIC struct {
	counters         atomic.Pointer[func() iwarp.Counters]
	messages, octets *prometheus.Desc
	terminates       *prometheus.Desc
	batches          *prometheus.Desc
	spinCaught       *prometheus.Desc
	inline           *prometheus.Desc
}

func newRNIC(prefix string) *RNIC {
	return &RNIC{
		messages: prometheus.NewDesc(prefix+"_rdma_messages_total",
			"RDMAP messages sent and received by the RNIC (write, read_request, read_response, send), over all its connections.",
			[]string{"direction", "message"}, nil),
		octets: prometheus.NewDesc(prefix+"_rdma_octets_total",
			"ULP payload octets of RDMAP messages sent and received (no DDP, MPA or TCP overhead).",
			[]string{"direction"}, nil),
		terminates: prometheus.NewDesc(prefix+"_rdma_terminates_total",
			"Streams ended by an RFC 5040 Terminate, by origin (local: this end found the peer's protocol error; remote: the peer found one), layer (RDMAP, DDP, LLP: MPA's CRC and framing errors) and error.",
			[]string{"origin", "layer", "error"}, nil),
		batches: prometheus.NewDesc(prefix+"_rdma_transmit_batches_total",
			"Transmit batches written to the lower layer (each one write system call or more), by writer: the poster itself (direct, the sender idle) or the sender goroutine. Octets sent over batches is the batching achieved.",
			[]string{"writer"}, nil),
		spinCaught: prometheus.NewDesc(prefix+"_rdma_spin_caught_total",
			"Messages whose first octets a receiver's poll found before it slept (read spin): the wake-ups the spin saved.",
			nil, nil),
		inline: prometheus.NewDesc(prefix+"_rdma_inline_total",
			"Times a receiver handed what it had just received to its consumer on its own goroutine (inline consumer), with no hand-over to another.",
			nil, nil),
	}
}

// Set names where the counters come from: a Device's Counters method.
func (r *RNIC) Set(counters func() iwarp.Counters) { r.counters.Store(&counters) }

// Describe implements prometheus.Collector.
func (r *RNIC) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.messages
	ch <- r.octets
	ch <- r.terminates
	ch <- r.batches
	ch <- r.spinCaught
	ch <- r.inline
}

// Collect implements prometheus.Collector.
func (r *RNIC) Collect(ch chan<- prometheus.Metric) {
	f := r.counters.Load()
	if f == nil {
		return
	}
	c := (*f)()
	for m := range iwarp.NumMessages {
		ch <- prometheus.MustNewConstMetric(r.messages, prometheus.CounterValue, float64(c.Sent[m]), "sent", m.String())
		ch <- prometheus.MustNewConstMetric(r.messages, prometheus.CounterValue, float64(c.Received[m]), "received", m.String())
	}
	ch <- prometheus.MustNewConstMetric(r.octets, prometheus.CounterValue, float64(c.SentOctets), "sent")
	ch <- prometheus.MustNewConstMetric(r.octets, prometheus.CounterValue, float64(c.ReceivedOctets), "received")
	ch <- prometheus.MustNewConstMetric(r.batches, prometheus.CounterValue, float64(c.DirectWrites), "direct")
	ch <- prometheus.MustNewConstMetric(r.batches, prometheus.CounterValue, float64(c.Writes-c.DirectWrites), "sender")
	ch <- prometheus.MustNewConstMetric(r.spinCaught, prometheus.CounterValue, float64(c.SpinCaught))
	ch <- prometheus.MustNewConstMetric(r.inline, prometheus.CounterValue, float64(c.Inline))
	for _, t := range c.Terminates {
		origin := "local"
		if t.Remote {
			origin = "remote"
		}
		ch <- prometheus.MustNewConstMetric(r.terminates, prometheus.CounterValue, float64(t.Count),
			origin, t.Err.Layer.String(), terminateError(t))
	}
}

// terminateError is a Terminate's error label: its RFC 5040 text, with the
// type and code in hexadecimal so that two errors never share a label.
func terminateError(t iwarp.TerminateCount) string {
	return t.Err.String() + " (type 0x" + strconv.FormatUint(uint64(t.Err.Type), 16) + ", code 0x" + strconv.FormatUint(uint64(t.Err.Code), 16) + ")"
}
