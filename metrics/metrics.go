// Package metrics exposes what ddptarget and a long-running ddpinitiator
// (mount, attach) do as Prometheus metrics: it implements the Observer
// interfaces of transport/target and transport/initiator on top of
// client_golang, and serves a registry as Prometheus text on /metrics.
//
// The Observers' Command methods run on the data path of every SCSI
// command, so they allocate nothing and take no lock: the label children of
// each target and LUN are created once, the first time it is seen (or
// ahead, with Target.AddLUN), and found again through a copy-on-write map
// behind an atomic pointer. What is left per command is client_golang's
// own atomic adds.
//
// RDMA-level counters (RDMA operations, MPA/DDP errors, Terminates) are not
// here: package iwarp does not report them yet.
package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/prometheus/client_golang/prometheus"
)

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histograms: 10 µs to 1 s in 1-2.5-5 steps.
var LatencyBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,
}

// Operation groups: the value of the op label, by CDB operation code.
const (
	OpRead  = "read"  // READ(6/10/12/16)
	OpWrite = "write" // WRITE(6/10/12/16), WRITE AND VERIFY, COMPARE AND WRITE, ORWRITE
	OpFlush = "flush" // SYNCHRONIZE CACHE(10/16)
	OpUnmap = "unmap" // UNMAP, WRITE SAME(10/16) (ranges deallocated or zeroed without their data)
	OpOther = "other" // everything else: INQUIRY, READ CAPACITY, TEST UNIT READY, ...
)

// OpGroups are the op label values, in the order of their indexes.
var OpGroups = []string{OpRead, OpWrite, OpFlush, OpUnmap, OpOther}

const (
	opRead = iota
	opWrite
	opFlush
	opUnmap
	opOther
	numOps
)

// opOf maps a CDB's first octet to its group.
var opOf = func() (t [256]uint8) {
	for i := range t {
		t[i] = opOther
	}
	for _, c := range []int{scsi.Read6, scsi.Read10, scsi.Read12, scsi.Read16} {
		t[c] = opRead
	}
	for _, c := range []int{scsi.Write6, scsi.Write10, scsi.Write12, scsi.Write16,
		scsi.WriteAndVerify10, scsi.WriteAndVerify12, scsi.WriteAndVerify16,
		scsi.CompareAndWrite, scsi.OrWrite16} {
		t[c] = opWrite
	}
	t[scsi.SynchronizeCache10], t[scsi.SynchronizeCache16] = opFlush, opFlush
	t[scsi.Unmap], t[scsi.WriteSame10], t[scsi.WriteSame16] = opUnmap, opUnmap, opUnmap
	return t
}()

// OpGroup returns the op label of a CDB operation code.
func OpGroup(opcode byte) string { return OpGroups[opOf[opcode]] }

// Status label values, by SAM status.
const (
	StatusGood                = "good"
	StatusCheckCondition      = "check_condition"
	StatusBusy                = "busy"
	StatusReservationConflict = "reservation_conflict"
	StatusTaskSetFull         = "task_set_full"
	StatusOther               = "other" // CONDITION MET, ACA ACTIVE, TASK ABORTED
)

// Statuses are the status label values, in the order of their indexes.
var Statuses = []string{StatusGood, StatusCheckCondition, StatusBusy, StatusReservationConflict, StatusTaskSetFull, StatusOther}

const (
	stGood = iota
	stCheckCondition
	stBusy
	stReservationConflict
	stTaskSetFull
	stOther
	numStatuses
)

// statusReservationConflict is SAM-5's RESERVATION CONFLICT (transport/scsi
// does not name it: no reservation is ever held).
const statusReservationConflict = 0x18

func statusIndex(s byte) int {
	switch s {
	case scsi.StatusGood:
		return stGood
	case scsi.StatusCheckCondition:
		return stCheckCondition
	case scsi.StatusBusy:
		return stBusy
	case statusReservationConflict:
		return stReservationConflict
	case scsi.StatusTaskSetFull:
		return stTaskSetFull
	}
	return stOther
}

// StatusName returns the status label of a SAM status.
func StatusName(s byte) string { return Statuses[statusIndex(s)] }

// ioVecs are the vectors both sides keep per target and LUN.
type ioVecs struct {
	commands *prometheus.CounterVec   // target, lun, op, status
	latency  *prometheus.HistogramVec // target, lun, op
	read     *prometheus.CounterVec   // target, lun
	written  *prometheus.CounterVec   // target, lun
}

func newIOVecs(prefix, side string) ioVecs {
	return ioVecs{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_commands_total",
			Help: "SCSI commands " + side + ", by target, LUN, operation group and SAM status.",
		}, []string{"target", "lun", "op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_command_duration_seconds",
			Help:    "Latency of the SCSI commands " + side + ", by target, LUN and operation group.",
			Buckets: LatencyBuckets,
		}, []string{"target", "lun", "op"}),
		read: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_read_bytes_total",
			Help: "Octets of data-in (read from the LUN), by target and LUN.",
		}, []string{"target", "lun"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_written_bytes_total",
			Help: "Octets of data-out (written to the LUN), by target and LUN.",
		}, []string{"target", "lun"}),
	}
}

func (v ioVecs) register(r prometheus.Registerer) {
	r.MustRegister(v.commands, v.latency, v.read, v.written)
}

// lunSeries are the label children of one target and LUN: what a command
// touches, found without allocating.
type lunSeries struct {
	commands [numOps][numStatuses]prometheus.Counter
	latency  [numOps]prometheus.Observer
	read     prometheus.Counter
	written  prometheus.Counter
}

func (v ioVecs) series(target string, lun uint64) *lunSeries {
	l := strconv.FormatUint(lun, 10)
	s := &lunSeries{read: v.read.WithLabelValues(target, l), written: v.written.WithLabelValues(target, l)}
	for o, op := range OpGroups {
		s.latency[o] = v.latency.WithLabelValues(target, l, op)
		for st, status := range Statuses {
			s.commands[o][st] = v.commands.WithLabelValues(target, l, op, status)
		}
	}
	return s
}

// observe counts one command.
func (s *lunSeries) observe(opcode, status byte, dataIn, dataOut uint32, seconds float64) {
	o := opOf[opcode]
	s.commands[o][statusIndex(status)].Inc()
	s.latency[o].Observe(seconds)
	if dataIn != 0 {
		s.read.Add(float64(dataIn))
	}
	if dataOut != 0 {
		s.written.Add(float64(dataOut))
	}
}

// cache maps keys to values created once: readers load an immutable map
// through an atomic pointer (no lock, no allocation); a miss takes the
// mutex and publishes a copy with the new entry.
type cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]*V]
	mu sync.Mutex
}

// load returns the value of k, or nil.
func (c *cache[K, V]) load(k K) *V {
	if m := c.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// add returns the value of k, made by mk unless another goroutine made it
// first.
func (c *cache[K, V]) add(k K, mk func() *V) *V {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]*V, 1+lenOf(old))
	if old != nil {
		for key, v := range *old {
			next[key] = v
		}
	}
	v := mk()
	next[k] = v
	c.m.Store(&next)
	return v
}

func lenOf[K comparable, V any](m *map[K]*V) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
