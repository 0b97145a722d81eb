package initiator_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
)

const (
	targetName    = "iqn.2026-11.io.ddpstore:disk1"
	initiatorName = "iqn.2026-11.io.ddpstore:host1"
)

// uaProxy sits between an initiator and an iSCSI/TCP target and turns
// the next `left` SCSI Responses into CHECK CONDITION with the sense data
// sense, as a target that reports a unit attention does (Linux's tgt
// answers the first command on each LU of a new session so, with 29h/00h
// POWER ON, RESET, OR BUS DEVICE RESET OCCURRED). Digests must be off.
type uaProxy struct {
	addr  string
	left  atomic.Int32
	sense []byte
	seen  atomic.Int32 // SCSI Responses that passed through
}

func newUAProxy(t *testing.T, to string) *uaProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &uaProxy{addr: l.Addr().String()}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer wg.Done(); p.down(c, u); c.Close() }()
		}
	}()
	return p
}

// down copies the target's PDUs to the initiator, rewriting responses.
func (p *uaProxy) down(w io.Writer, r io.Reader) {
	hdr := make([]byte, 48)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		ahs := int(hdr[4]) * 4
		dsl := int(hdr[5])<<16 | int(hdr[6])<<8 | int(hdr[7])
		rest := make([]byte, ahs+(dsl+3)&^3)
		if _, err := io.ReadFull(r, rest); err != nil {
			return
		}
		if hdr[0]&0x3f == 0x21 { // SCSI Response
			p.seen.Add(1)
			if p.left.Add(-1) >= 0 {
				hdr[2], hdr[3] = 0, 0x02 // completed, CHECK CONDITION
				seg := binary.BigEndian.AppendUint16(nil, uint16(len(p.sense)))
				seg = append(seg, p.sense...)
				hdr[5], hdr[6], hdr[7] = 0, byte(len(seg)>>8), byte(len(seg))
				clear(hdr[44:48]) // residual count
				hdr[1] &^= 0x06   // no underflow, no overflow
				for len(seg)%4 != 0 {
					seg = append(seg, 0)
				}
				rest = seg
			}
		}
		if _, err := w.Write(append(hdr[:48:48], rest...)); err != nil {
			return
		}
	}
}

// fixedSense is fixed-format sense data (SPC-4 4.5.3) with key, ASC, ASCQ.
func fixedSense(key, asc, ascq byte) []byte {
	s := make([]byte, 18)
	s[0], s[2], s[7], s[12], s[13] = 0x70, key, 10, asc, ascq
	return s
}

func tcpTarget(t *testing.T) string {
	t.Helper()
	st, err := blockdev.NewMemory(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l0, err := lu.New(1, st)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := lu.NewTarget(targetName, map[uint16]*lu.LU{0: l0})
	if err != nil {
		t.Fatal(err)
	}
	dev := iwarp.NewDevice(0)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lg := log.New()
	lg.SetOutput(io.Discard)
	srv, err := target.NewServer(dev, target.Config{Exports: []target.Export{{Target: tg}},
		Portals: []login.Portal{{Addr: tl.Addr().String(), TPGT: 1}}, Log: log.NewEntry(lg)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTCP(tl) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeTCP: %v", err)
		}
		dev.Close()
	})
	return tl.Addr().String()
}

// quietConfig is an initiator's configuration for tcpTarget's target, with
// a 1 MiB buffer region and its log discarded.
func quietConfig() initiator.Config {
	lg := log.New()
	lg.SetOutput(io.Discard)
	return initiator.Config{InitiatorName: initiatorName, TargetName: targetName, Buffers: 1 << 20, Log: log.NewEntry(lg)}
}

// TestResetUnitAttentionReissued: a command answered with a reset unit
// attention is sent again and completes GOOD; one answered so more often
// than Do retries, or with another unit attention, reaches the caller.
func TestResetUnitAttentionReissued(t *testing.T) {
	p := newUAProxy(t, tcpTarget(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, p.addr, quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, err := s.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	write16 := []byte{0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0} // 8 blocks at LBA 8
	tur := make([]byte, 6)
	for _, c := range []struct {
		name     string
		sense    []byte
		inject   int32
		cdb      []byte
		dir      initiator.Direction
		data     []byte
		status   uint8
		attempts int32
	}{
		{"reset UA on TEST UNIT READY", fixedSense(6, 0x29, 0), 1, tur, initiator.NoData, nil, 0, 2},
		{"reset UA (descriptor sense) on WRITE", []byte{0x72, 6, 0x29, 1, 0, 0, 0, 0}, 1, write16, initiator.DataOut, buf, 0, 2},
		{"reset UA, three times", fixedSense(6, 0x29, 3), 3, write16, initiator.DataOut, buf, 0, 4},
		{"reset UA, more than Do retries", fixedSense(6, 0x29, 0), 100, tur, initiator.NoData, nil, 2, 4},
		{"capacity changed UA", fixedSense(6, 0x2a, 9), 1, tur, initiator.NoData, nil, 2, 1},
		{"not ready", fixedSense(2, 0x04, 0), 1, tur, initiator.NoData, nil, 2, 1},
	} {
		p.sense = c.sense
		p.left.Store(c.inject)
		p.seen.Store(0)
		cmd := &initiator.Command{CDB: c.cdb, Dir: c.dir, Data: c.data}
		if err := s.Do(ctx, cmd); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cmd.Status != c.status || p.seen.Load() != c.attempts {
			t.Errorf("%s: status %#x sense %x after %d attempts, want status %#x after %d", c.name, cmd.Status, cmd.Sense, p.seen.Load(), c.status, c.attempts)
		}
		if c.status != 0 && string(cmd.Sense) != string(c.sense) {
			t.Errorf("%s: sense %x, want %x", c.name, cmd.Sense, c.sense)
		}
	}
	p.left.Store(0)
	if err := s.Logout(ctx); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("logout: %v", err)
	}
}

func TestResetUnitAttention(t *testing.T) {
	for _, c := range []struct {
		status uint8
		sense  []byte
		want   bool
	}{
		{2, fixedSense(6, 0x29, 0), true},
		{2, fixedSense(6, 0x29, 7), true},
		{2, append([]byte{0x71}, fixedSense(6, 0x29, 0)[1:]...), true},
		{2, []byte{0x72, 6, 0x29, 0}, true},
		{2, []byte{0xf0, 0, 6, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29, 0}, true}, // VALID bit set
		{2, fixedSense(6, 0x2a, 9), false},
		{2, fixedSense(5, 0x29, 0), false},
		{0, fixedSense(6, 0x29, 0), false},
		{8, nil, false},
		{2, fixedSense(6, 0x29, 0)[:12], false},
		{2, []byte{0x72, 6}, false},
	} {
		if got := initiator.ResetUnitAttention(c.status, c.sense); got != c.want {
			t.Errorf("ResetUnitAttention(%#x, %x) = %v", c.status, c.sense, got)
		}
	}
}
