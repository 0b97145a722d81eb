package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/ddpstore/ddpstore/transport/target"
	dto "github.com/prometheus/client_model/go"
)

func TestOpGroup(t *testing.T) {
	for _, tc := range []struct {
		op   byte
		want string
	}{
		{scsi.Read6, OpRead}, {scsi.Read10, OpRead}, {scsi.Read12, OpRead}, {scsi.Read16, OpRead},
		{scsi.Write6, OpWrite}, {scsi.Write10, OpWrite}, {scsi.Write16, OpWrite}, {scsi.WriteAndVerify16, OpWrite},
		{scsi.CompareAndWrite, OpWrite}, {scsi.OrWrite16, OpWrite},
		{scsi.SynchronizeCache10, OpFlush}, {scsi.SynchronizeCache16, OpFlush},
		{scsi.Unmap, OpUnmap}, {scsi.WriteSame10, OpUnmap}, {scsi.WriteSame16, OpUnmap},
		{scsi.Inquiry, OpOther}, {0x00, OpOther}, {scsi.ServiceActionIn16, OpOther}, {0xff, OpOther},
	} {
		if got := OpGroup(tc.op); got != tc.want {
			t.Errorf("OpGroup(%#02x) = %s, want %s", tc.op, got, tc.want)
		}
	}
	for _, tc := range []struct {
		status byte
		want   string
	}{
		{0x00, StatusGood}, {0x02, StatusCheckCondition}, {0x08, StatusBusy}, {0x18, StatusReservationConflict},
		{0x28, StatusTaskSetFull}, {0x04, StatusOther}, {0x30, StatusOther}, {0x40, StatusOther},
	} {
		if got := StatusName(tc.status); got != tc.want {
			t.Errorf("StatusName(%#02x) = %s, want %s", tc.status, got, tc.want)
		}
	}
	if RejectReason(0x09) != "invalid_pdu_field" || RejectReason(0) != "connection_dropped" || RejectReason(0x77) != "other" {
		t.Error("RejectReason")
	}
}

// TestObserversAllocateNothing: once a target and LUN have been seen, the
// Command methods of both Observers allocate nothing, as the data path
// requires; nor do the target's other methods.
func TestObserversAllocateNothing(t *testing.T) {
	m := NewTarget()
	tc := target.CommandInfo{Target: "iqn.2026-11.io.ddpstore:t", LUN: 3, Opcode: scsi.Read10, DataIn: 4096, Latency: 80 * time.Microsecond}
	m.Command(tc)
	if n := testing.AllocsPerRun(1000, func() {
		m.Command(tc)
		tc.Opcode ^= scsi.Read10 ^ scsi.Write10 // alternate read and write
		tc.DataIn, tc.DataOut = tc.DataOut, tc.DataIn
	}); n != 0 {
		t.Errorf("target Command: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		m.Connection(1)
		m.Session("Normal", 1)
		m.Rejected(0x04)
		m.Session("Normal", -1)
		m.Connection(-1)
	}); n != 0 {
		t.Errorf("target Connection/Session/Rejected: %v allocations per call", n)
	}

	s := NewInitiator().Session("iqn.2026-11.io.ddpstore:t")
	ic := initiator.CommandInfo{LUN: 1, Opcode: scsi.Write16, Status: scsi.StatusBusy, DataOut: 65536, Latency: time.Millisecond}
	s.Command(ic)
	if n := testing.AllocsPerRun(1000, func() {
		s.Command(ic)
		s.ConnectionLost()
		s.Reconnected()
	}); n != 0 {
		t.Errorf("initiator Command: %v allocations per call", n)
	}
}

// TestCounts: what the Observers are told is what Counts and the registry
// say, under the labels the documentation names.
func TestCounts(t *testing.T) {
	m := NewTarget()
	const tg = "iqn.2026-11.io.ddpstore:t"
	m.AddLUN(tg, 7)
	for range 3 {
		m.Command(target.CommandInfo{Target: tg, LUN: 0, Opcode: scsi.Read16, DataIn: 512, Latency: 30 * time.Microsecond})
	}
	m.Command(target.CommandInfo{Target: tg, LUN: 0, Opcode: scsi.Write10, DataOut: 8192, Latency: 2 * time.Millisecond})
	m.Command(target.CommandInfo{Target: tg, LUN: 0, Opcode: scsi.Write10, Status: scsi.StatusCheckCondition, Latency: time.Millisecond})
	m.Command(target.CommandInfo{Target: tg, LUN: 0, Opcode: scsi.Inquiry, DataIn: 36})
	m.Session("Normal", 1)
	m.Session("Discovery", 1)
	m.Session("Discovery", -1)
	m.Connection(1)
	m.Rejected(0x05)
	m.Rejected(0x05)
	want := IOCounts{Commands: 6, Reads: 3, Writes: 2, Errors: 1, ReadBytes: 3*512 + 36, WrittenBytes: 8192}
	if got := m.Counts(tg, 0); got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}
	if got := m.Counts(tg, 7); got != (IOCounts{}) {
		t.Errorf("Counts of an idle LUN = %+v", got)
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	val := func(name string, labels ...string) float64 {
		t.Helper()
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
		metric:
			for _, mt := range f.Metric {
				have := map[string]string{}
				for _, lp := range mt.Label {
					have[lp.GetName()] = lp.GetValue()
				}
				for i := 0; i < len(labels); i += 2 {
					if have[labels[i]] != labels[i+1] {
						continue metric
					}
				}
				return value(mt)
			}
		}
		t.Errorf("no %s%v", name, labels)
		return -1
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ddptarget_commands_total", []string{"lun", "0", "op", "read", "status", "good"}, 3},
		{"ddptarget_commands_total", []string{"lun", "0", "op", "write", "status", "check_condition"}, 1},
		{"ddptarget_commands_total", []string{"lun", "7", "op", "flush", "status", "busy"}, 0},
		{"ddptarget_command_duration_seconds", []string{"target", tg, "lun", "0", "op", "read"}, 3},
		{"ddptarget_read_bytes_total", []string{"lun", "0"}, 3*512 + 36},
		{"ddptarget_written_bytes_total", []string{"lun", "0"}, 8192},
		{"ddptarget_sessions", []string{"kind", "normal"}, 1},
		{"ddptarget_sessions", []string{"kind", "discovery"}, 0},
		{"ddptarget_connections", nil, 1},
		{"ddptarget_rejects_total", []string{"reason", "command_not_supported"}, 2},
		{"ddptarget_rejects_total", []string{"reason", "protocol_error"}, 0},
	} {
		if got := val(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The read histogram put its three 30 µs commands under 50 µs.
	for _, f := range fams {
		if f.GetName() != "ddptarget_command_duration_seconds" {
			continue
		}
		for _, mt := range f.Metric {
			if !strings.Contains(mt.String(), `value:"read"`) || !strings.Contains(mt.String(), `value:"0"`) {
				continue
			}
			for _, b := range mt.Histogram.Bucket {
				want := uint64(0)
				if b.GetUpperBound() >= 50e-6 {
					want = 3
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("read latency bucket le=%g holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
			}
		}
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

func TestBuckets(t *testing.T) {
	if LatencyBuckets[0] != 10e-6 || LatencyBuckets[len(LatencyBuckets)-1] != 1 {
		t.Errorf("buckets %v do not span 10 µs .. 1 s", LatencyBuckets)
	}
	for i := 1; i < len(LatencyBuckets); i++ {
		if LatencyBuckets[i] <= LatencyBuckets[i-1] {
			t.Errorf("buckets not increasing at %d", i)
		}
	}
}

// BenchmarkTargetCommand is the Observer's cost per command.
func BenchmarkTargetCommand(b *testing.B) {
	m := NewTarget()
	tc := target.CommandInfo{Target: "iqn.2026-11.io.ddpstore:t", Opcode: scsi.Read10, DataIn: 4096, Latency: 80 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Command(tc)
		}
	})
}
