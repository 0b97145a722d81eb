package metrics_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/metrics"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/ddpstore/ddpstore/transport/target"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const tgName = "iqn.2026-11.io.ddpstore:metrics"

// startTarget serves a 1 MiB memory LUN 0 with m as its Observer, as
// internal/testtarget does without one.
func startTarget(t *testing.T, m *metrics.Target) (*iwarp.Device, string) {
	t.Helper()
	dev := iwarp.NewDevice(0)
	l0, err := lu.New(1, testtarget.Memory(t, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := lu.NewTarget(tgName, map[uint16]*lu.LU{0: l0})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv, err := target.NewServer(dev, target.Config{Exports: []target.Export{{Target: tg}},
		Portals: []login.Portal{{Addr: addr, TPGT: 1}}, Observer: m, Log: testtarget.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		dev.Close()
	})
	return dev, addr
}

// scrape fetches /metrics and parses it.
func scrape(t *testing.T, addr string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, body)
	}
	return body, fams
}

// get returns the value of the sample of family name whose labels include
// labels (name, value, ...), or fails.
func get(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Errorf("no %s in the scrape", name)
		return -1
	}
metric:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue metric
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Errorf("no %s%v in the scrape", name, labels)
	return -1
}

// TestScrapeLiveTarget runs a target and an initiator session in process,
// each with its metrics served on a loopback port, does I/O, and scrapes
// both: the counts are the I/O done, and promtool finds the text valid.
func TestScrapeLiveTarget(t *testing.T) {
	tm, im := metrics.NewTarget(), metrics.NewInitiator()
	dev, addr := startTarget(t, tm)
	// Target and initiator share the one RNIC here: each message is
	// counted once sent and once received.
	tm.RNIC.Set(dev.Counters)
	im.RNIC.Set(dev.Counters)
	tsrv, err := metrics.Listen("127.0.0.1:0", tm.Registry)
	if err != nil {
		t.Fatal(err)
	}
	defer tsrv.Close()
	isrv, err := metrics.Listen("127.0.0.1:0", im.Registry)
	if err != nil {
		t.Fatal(err)
	}
	defer isrv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, dev, "tcp", addr, initiator.Config{InitiatorName: testtarget.InitiatorName,
		TargetName: tgName, Buffers: 1 << 20, Observer: im.Session(tgName), Log: testtarget.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, err := s.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	rw := func(op byte, lba uint32, blocks uint16, dir initiator.Direction) (uint8, error) {
		cdb := make([]byte, 10)
		cdb[0] = op
		binary.BigEndian.PutUint32(cdb[2:], lba)
		binary.BigEndian.PutUint16(cdb[7:], blocks)
		var data []byte
		if dir != initiator.NoData {
			data = buf[:int(blocks)*512]
		}
		cmd := &initiator.Command{LUN: 0, CDB: cdb, Dir: dir, Data: data}
		err := s.Do(ctx, cmd)
		if err == nil && cmd.Status != scsi.StatusGood && op != scsi.Read10 {
			err = errors.New("status not GOOD")
		}
		return cmd.Status, err
	}
	const writes, reads = 5, 7
	for i := range writes {
		if _, err := rw(scsi.Write10, uint32(i*16), 16, initiator.DataOut); err != nil {
			t.Fatalf("WRITE(10): %v", err)
		}
	}
	for i := range reads {
		if st, err := rw(scsi.Read10, uint32(i*8), 8, initiator.DataIn); err != nil || st != scsi.StatusGood {
			t.Fatalf("READ(10): %v, status %#x", err, st)
		}
	}
	if _, err := rw(scsi.SynchronizeCache10, 0, 0, initiator.NoData); err != nil {
		t.Fatalf("SYNCHRONIZE CACHE(10): %v", err)
	}
	// A read past the end of the 2048-block LUN: CHECK CONDITION.
	if st, err := rw(scsi.Read10, 4096, 1, initiator.DataIn); err != nil || st != scsi.StatusCheckCondition {
		t.Fatalf("READ(10) past the end: %v, status %#x, want CHECK CONDITION", err, st)
	}

	body, fams := scrape(t, tsrv.Addr())
	lun := []string{"target", tgName, "lun", "0"}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ddptarget_commands_total", append(lun, "op", "write", "status", "good"), writes},
		{"ddptarget_commands_total", append(lun, "op", "read", "status", "good"), reads},
		{"ddptarget_commands_total", append(lun, "op", "read", "status", "check_condition"), 1},
		{"ddptarget_commands_total", append(lun, "op", "flush", "status", "good"), 1},
		{"ddptarget_command_duration_seconds", append(lun, "op", "write"), writes},
		{"ddptarget_command_duration_seconds", append(lun, "op", "read"), reads + 1},
		{"ddptarget_written_bytes_total", lun, writes * 16 * 512},
		{"ddptarget_read_bytes_total", lun, reads * 8 * 512},
		{"ddptarget_sessions", []string{"kind", "normal"}, 1},
		{"ddptarget_connections", nil, 1},
		{"ddptarget_rejects_total", []string{"reason", "protocol_error"}, 0},
		// Each READ's data is one RDMA Write; the WRITEs' data went as
		// immediate data.
		{"ddptarget_rdma_messages_total", []string{"direction", "sent", "message", "write"}, reads},
		{"ddptarget_rdma_messages_total", []string{"direction", "received", "message", "write"}, reads},
		{"ddptarget_rdma_messages_total", []string{"direction", "sent", "message", "read_request"}, 0},
	} {
		if got := get(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("target: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The initiator also issued its own commands at login (REPORT LUNS,
	// READ CAPACITY and such, if any): count only reads, writes, flushes.
	sends := get(t, fams, "ddptarget_rdma_messages_total", "direction", "sent", "message", "send")
	if got := get(t, fams, "ddptarget_rdma_messages_total", "direction", "received", "message", "send"); sends < 2*(writes+reads) || got != sends {
		t.Errorf("target: RDMA Sends sent %v, received %v: want the same, at least a command and a response per I/O", sends, got)
	}
	if got := get(t, fams, "ddptarget_rdma_octets_total", "direction", "sent"); got < reads*8*512+writes*16*512 {
		t.Errorf("target: RDMA octets sent %v, fewer than the data moved", got)
	}
	// Every message sent went out in some transmit batch, and a batch
	// carries at least one message.
	batches := get(t, fams, "ddptarget_rdma_transmit_batches_total", "writer", "direct") +
		get(t, fams, "ddptarget_rdma_transmit_batches_total", "writer", "sender")
	if sent := sends + reads; batches < 1 || batches > sent {
		t.Errorf("target: %v transmit batches for %v messages sent", batches, sent)
	}
	for _, name := range []string{"ddptarget_rdma_spin_caught_total", "ddptarget_rdma_inline_total"} {
		if got := get(t, fams, name); got < 0 {
			t.Errorf("target: %s = %v", name, got)
		}
	}
	ibody, ifams := scrape(t, isrv.Addr())
	if got := get(t, ifams, "ddpinitiator_rdma_messages_total", "direction", "sent", "message", "send"); got != sends {
		t.Errorf("initiator: RDMA Sends %v, want the device's %v", got, sends)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ddpinitiator_commands_total", append(lun, "op", "write", "status", "good"), writes},
		{"ddpinitiator_commands_total", append(lun, "op", "read", "status", "good"), reads},
		{"ddpinitiator_commands_total", append(lun, "op", "read", "status", "check_condition"), 1},
		{"ddpinitiator_commands_total", append(lun, "op", "flush", "status", "good"), 1},
		{"ddpinitiator_command_duration_seconds", append(lun, "op", "read"), reads + 1},
		{"ddpinitiator_written_bytes_total", lun, writes * 16 * 512},
		{"ddpinitiator_connection_losses_total", []string{"target", tgName}, 0},
		{"ddpinitiator_reconnects_total", []string{"target", tgName}, 0},
	} {
		if got := get(t, ifams, c.name, c.labels...); got != c.want {
			t.Errorf("initiator: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The initiator counts the data it asked for: the failed read asked
	// for one block.
	if got := get(t, ifams, "ddpinitiator_read_bytes_total", lun...); got != reads*8*512+512 {
		t.Errorf("initiator: read bytes %v, want %v", got, reads*8*512+512)
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil && runtime.GOOS == "linux" {
		t.Error("the Go and process collectors are missing")
	}
	promtoolCheck(t, "ddptarget", body)
	promtoolCheck(t, "ddpinitiator", ibody)
}

// promtoolCheck runs "promtool check metrics" on a scrape. promtool comes
// from Debian's prometheus package, which scripts/opstools.sh installs;
// when it cannot, the check is skipped with its reason.
func promtoolCheck(t *testing.T, what string, body []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		out, ierr := exec.Command("../scripts/opstools.sh").CombinedOutput()
		if path, err = exec.LookPath("promtool"); err != nil {
			t.Logf("SKIP promtool check metrics: promtool is not installed and scripts/opstools.sh could not install it (%v): %s", ierr, bytes.TrimSpace(out))
			return
		}
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		f := filepath.Join(t.TempDir(), what+".prom")
		os.WriteFile(f, body, 0o644)
		t.Errorf("promtool check metrics on the %s scrape: %v\n%s", what, err, out)
		return
	}
	t.Logf("promtool check metrics (%s): ok %s", what, bytes.TrimSpace(out))
}

// TestListenError: a listen address that cannot be had is an error at
// once, not a silent endpoint-less daemon.
func TestListenError(t *testing.T) {
	s, err := metrics.Listen("127.0.0.1:0", metrics.NewTarget().Registry)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s2, err := metrics.Listen(s.Addr(), metrics.NewTarget().Registry); err == nil {
		s2.Close()
		t.Fatalf("a second listener on %s: no error", s.Addr())
	} else if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q does not say why", err)
	}
}
