package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
)

// dialTCP logs in to the rig's iSCSI/TCP portal.
func (r *rig) dialTCP(t testing.TB, cfg initiator.Config) *initiator.Session {
	t.Helper()
	s, err := r.tryDialVia(initiator.NetworkISCSITCP, r.tcpAddr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestISCSIOverTCP: our initiator and target over iSCSI/TCP, with and
// without digests and immediate data, moving every size from one block to
// several bursts (Data-In segments, R2T sequences, Data-Out PDUs), while
// an iSER session on the same LU reads what the TCP session wrote and the
// other way round.
func TestISCSIOverTCP(t *testing.T) {
	checkGoroutines(t)
	// Both readers spin as ddptarget's and ddpinitiator's do (the plain
	// case's initiator; the target's for all).
	r := newRig(t, rigOpts{sizes: []int64{64 << 20}, tcp: true, cfg: target.Config{FirstBurst: 64 << 10, MaxBurst: 256 << 10,
		TCPReadSpin: iwarp.DefaultReadSpin, Log: testLog(t)}})
	iser := r.dial(t, initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:iser"})
	for i, c := range []struct {
		name   string
		cfg    initiator.Config
		digest bool
	}{
		{"plain", initiator.Config{Conn: iwarp.ConnConfig{ReadSpin: iwarp.DefaultReadSpin}}, false},
		{"digests", initiator.Config{HeaderDigest: true, DataDigest: true}, true},
		{"no immediate data", initiator.Config{NoImmediateData: true}, false},
		// The mount's: the reader spins only for the answer to a command
		// alone in flight, woken for it from its read (a deadline kick).
		{"awaited spin", initiator.Config{Conn: iwarp.ConnConfig{ReadSpin: iwarp.DefaultReadSpin, ReadSpinAwaitedOnly: true},
			HeaderDigest: true, DataDigest: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.TargetName = targetName
			cfg.InitiatorName = fmt.Sprintf("iqn.2026-11.io.ddpstore:tcp%d", i)
			s := r.dialTCP(t, cfg)
			if p := s.Params(); p.RDMAExtensions || p.HeaderDigest != c.digest || p.DataDigest != c.digest {
				t.Fatalf("negotiated RDMAExtensions %v, digests %v/%v", p.RDMAExtensions, p.HeaderDigest, p.DataDigest)
			}
			for i, size := range []int{512, 4096, 8192 + 512, 64 << 10, 300 << 10, 1 << 20, 3<<20 + 4096} {
				if err := pattern(s, uint64(i)*8192, size, int64(i)); err != nil {
					t.Fatalf("%d octets: %v", size, err)
				}
				// The iSER session reads what TCP wrote.
				if err := crossCheck(s, iser, uint64(i)*8192, size); err != nil {
					t.Fatalf("%d octets: %v", size, err)
				}
			}
			// Many commands at once over one connection.
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := pattern(s, uint64(40000+w*512), 128<<10, int64(w)); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// WRITEs of 32 KiB and more went straight into the memory
			// LU, unless data digests are on: data must pass their
			// digest before they may reach the store.
			var placed, written uint64
			for _, si := range r.srv.SessionList() {
				if si.Initiator == cfg.InitiatorName {
					placed, written = si.PlacedBytes, si.WrittenBytes
				}
			}
			switch {
			case written == 0:
				t.Errorf("the session %s wrote nothing, by SessionList", cfg.InitiatorName)
			case c.digest && placed != 0:
				t.Errorf("%d of %d octets placed with data digests on", placed, written)
			case !c.digest && placed < 16*128<<10:
				t.Errorf("%d of %d octets placed, want at least the 16 concurrent 128 KiB WRITEs'", placed, written)
			}
		})
	}
}

// crossCheck writes through a and reads back through b.
func crossCheck(a, b *initiator.Session, lba uint64, size int) error {
	w, err := a.Alloc(size)
	if err != nil {
		return err
	}
	defer a.Free(w)
	rb, err := b.Alloc(size)
	if err != nil {
		return err
	}
	defer b.Free(rb)
	for i := range w {
		w[i] = byte(i*7 + int(lba))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc := &initiator.Command{CDB: write16(lba, uint32(size/512)), Dir: initiator.DataOut, Data: w}
	if err := a.Do(ctx, wc); err != nil || wc.Status != 0 {
		return fmt.Errorf("write: %v status %#x", err, wc.Status)
	}
	rc := &initiator.Command{CDB: read16(lba, uint32(size/512)), Dir: initiator.DataIn, Data: rb}
	if err := b.Do(ctx, rc); err != nil || rc.Status != 0 {
		return fmt.Errorf("read on the other transport: %v status %#x", err, rc.Status)
	}
	if !bytes.Equal(w, rb) {
		return fmt.Errorf("LBA %d: the other transport reads different data", lba)
	}
	return nil
}

// testLog sends the target's warnings to the test's log.
func testLog(t testing.TB) *log.Entry {
	l := log.New()
	l.SetLevel(log.InfoLevel) // "connection ended" says why a test connection went
	l.SetOutput(testWriter{t})
	return log.NewEntry(l)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimSpace(p))
	return len(p), nil
}

// TestTCPDataPathAllocatesNothing: a READ and a WRITE over iSCSI/TCP
// (initiator, target and sockets in this process) allocate nothing in
// steady state, as over iSER.
func TestTCPDataPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}, tcp: true})
	s := r.dialTCP(t, initiator.Config{TargetName: targetName, NopInterval: -1})
	for _, size := range []int{4096, 256 << 10} {
		buf, err := s.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		rd := &initiator.Command{CDB: read16(64, uint32(size/512)), Dir: initiator.DataIn, Data: buf}
		wr := &initiator.Command{CDB: write16(64, uint32(size/512)), Dir: initiator.DataOut, Data: buf}
		ctx := context.Background()
		for _, c := range []*initiator.Command{rd, wr} {
			c := c
			for i := 0; i < 20; i++ { // warm up: pools, queues, lists
				if err := s.Do(ctx, c); err != nil || c.Status != 0 {
					t.Fatalf("%v status %#x", err, c.Status)
				}
			}
			if n := testing.AllocsPerRun(200, func() { s.Do(ctx, c) }); n > 0 {
				t.Errorf("%d octets, %s: %v allocations per I/O", size, map[bool]string{true: "read", false: "write"}[c == rd], n)
			}
		}
	}
}

// TestTCPAbortPlacedWrites: large WRITEs over iSCSI/TCP, placed into the
// memory LU burst by burst, cancelled at varied moments (the initiator
// then sends ABORT TASK, perhaps while the target reads a burst into the
// store). The session goes on serving, what a later WRITE writes reads
// back, and once the server is closed the store closes: no placement's
// hold on it is left (the rig checks).
func TestTCPAbortPlacedWrites(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{64 << 20}, tcp: true, cfg: target.Config{FirstBurst: 64 << 10, MaxBurst: 256 << 10, Log: testLog(t)}})
	s := r.dialTCP(t, initiator.Config{TargetName: targetName})
	const size = 16 << 20
	buf, err := s.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	aborted := 0
	delays := []time.Duration{50 * time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 10 * time.Second}
	for i := range 12 {
		ctx, cancel := context.WithTimeout(context.Background(), delays[i%len(delays)])
		cmd := &initiator.Command{CDB: write16(uint64(i%3)*(size/512), size/512), Dir: initiator.DataOut, Data: buf}
		err := s.Do(ctx, cmd)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			aborted++
		case err != nil:
			t.Fatalf("write %d: %v", i, err)
		case cmd.Status != 0:
			t.Fatalf("write %d: status %#x", i, cmd.Status)
		}
		if err := pattern(s, 100000, 256<<10, int64(i)); err != nil {
			t.Fatalf("after write %d (aborted %v): %v", i, err != nil, err)
		}
	}
	t.Logf("%d of 12 writes aborted", aborted)
	if aborted == 0 || aborted == 12 {
		t.Errorf("%d of 12 writes aborted: the test tests aborts beside writes that end", aborted)
	}
	placed := uint64(0)
	for _, si := range r.srv.SessionList() {
		if si.Transport == "iscsi-tcp" {
			placed = si.PlacedBytes
		}
	}
	if placed == 0 {
		t.Error("nothing was placed: the test did not test placed WRITEs")
	}
}

// TestTCPLongPings: NOP-Outs with ping data up to what the initiator's
// send slots hold (64 KiB with immediate data), longer than the target's
// receive buffers (8 KiB), over and over: the buffers grow, the echoes
// come back whole, and WRITEs with immediate data still go through the
// grown buffers.
func TestTCPLongPings(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}, tcp: true})
	s := r.dialTCP(t, initiator.Config{TargetName: targetName})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, n := range []int{100, 8192, 8193, 20000, 65536, 8192, 65536} {
		data := bytes.Repeat([]byte{byte(i + 1)}, n)
		if err := s.Nop(ctx, data); err != nil {
			t.Fatalf("ping of %d octets: %v", n, err)
		}
		if err := pattern(s, uint64(i)*256, 64<<10, int64(i)); err != nil {
			t.Fatalf("after a ping of %d octets: %v", n, err)
		}
	}
}

// TestWrongTransportSaysSo: a login over iSCSI/TCP to an iSER portal, or
// over iSER to an iSCSI/TCP portal, fails with an error that names the
// likely mistake.
func TestWrongTransportSaysSo(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{tcp: true})
	cfg := initiator.Config{InitiatorName: initiatorName, TargetName: targetName, Log: quietLog(), Buffers: 1 << 20}
	_, err := r.tryDialVia(initiator.NetworkISCSITCP, r.addr, cfg)
	if err == nil || !strings.Contains(err.Error(), "is "+r.addr+" an iSER portal?") {
		t.Fatalf("iSCSI/TCP to the iSER portal: %v, want the error to ask whether it is an iSER portal", err)
	}
	cfg.Conn.StartupTimeout = 300 * time.Millisecond
	_, err = r.tryDialVia("tcp", r.tcpAddr, cfg)
	if err == nil || !strings.Contains(err.Error(), "is "+r.tcpAddr+" an iSCSI/TCP portal?") {
		t.Fatalf("iSER to the iSCSI/TCP portal: %v, want the error to ask whether it is an iSCSI/TCP portal", err)
	}
}
