package transport_test

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/internal/testtarget"
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

// rig is a target serving memory LUs on loopback.
type rig struct {
	dev  *iwarp.Device
	srv  *target.Server
	addr string
	// tcpAddr is the iSCSI/TCP portal's address (rigOpts.tcp).
	tcpAddr string
	luns    map[uint16]*lu.LU
}

type rigOpts struct {
	sizes      []int64          // LU sizes, LUN 0, 1, ...
	stores     []blockdev.Store // or the stores themselves
	initiators []string
	chap       *login.CHAP
	discovery  *login.CHAP
	cfg        target.Config
	tcp        bool // serve iSCSI over TCP too, on its own portal
	// alua, when set, is called on the target before it serves (ALUA
	// port groups).
	alua func(*lu.Target) error
}

func quietLog() *log.Entry {
	l := log.New()
	l.SetLevel(log.ErrorLevel)
	return log.NewEntry(l)
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	if len(o.sizes) == 0 {
		o.sizes = []int64{64 << 20}
	}
	r := &rig{dev: iwarp.NewDevice(0), luns: map[uint16]*lu.LU{}}
	if o.stores == nil {
		for _, size := range o.sizes {
			st, err := blockdev.NewMemory(size)
			if err != nil {
				t.Fatal(err)
			}
			o.stores = append(o.stores, st)
		}
	}
	for i, st := range o.stores {
		l, err := lu.New(uint64(i+1), st)
		if err != nil {
			t.Fatal(err)
		}
		r.luns[uint16(i)] = l
		t.Cleanup(func() {
			// After the server's close: a store still registered or
			// held by a transport is a leak.
			if err := st.Close(); err != nil {
				t.Errorf("closing a store after the server: %v", err)
			}
		})
	}
	tg, err := lu.NewTarget(targetName, r.luns)
	if err != nil {
		t.Fatal(err)
	}
	if o.alua != nil {
		if err := o.alua(tg); err != nil {
			t.Fatal(err)
		}
	}
	cfg := o.cfg
	cfg.Exports = []target.Export{{Target: tg, Initiators: o.initiators, CHAP: o.chap}}
	cfg.Discovery = o.discovery
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	l, err := r.dev.Listen(rigNet, "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	cfg.Portals = []login.Portal{{Addr: r.addr, TPGT: 1}}
	if r.srv, err = target.NewServer(r.dev, cfg); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- r.srv.Serve(l) }()
	serving := 1
	if o.tcp {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.tcpAddr = tl.Addr().String()
		serving++
		go func() { done <- r.srv.ServeTCP(tl) }()
	}
	t.Cleanup(func() {
		r.srv.Close()
		for i := 0; i < serving; i++ {
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
		r.dev.Close()
	})
	return r
}

func (r *rig) dial(t testing.TB, cfg initiator.Config) *initiator.Session {
	t.Helper()
	s, err := r.tryDial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (r *rig) tryDial(cfg initiator.Config) (*initiator.Session, error) {
	return r.tryDialVia(rigNet, r.addr, cfg)
}

// tryDialVia logs in over network to addr with the rig's defaults.
func (r *rig) tryDialVia(network, addr string, cfg initiator.Config) (*initiator.Session, error) {
	if cfg.InitiatorName == "" {
		cfg.InitiatorName = initiatorName
	}
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	if cfg.Buffers == 0 {
		cfg.Buffers = 32 << 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return initiator.Dial(ctx, r.dev, network, addr, cfg)
}

func read16(lba uint64, blocks uint32) []byte {
	c := make([]byte, 16)
	c[0] = 0x88
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], blocks)
	return c
}

func write16(lba uint64, blocks uint32) []byte {
	c := read16(lba, blocks)
	c[0] = 0x8a
	return c
}

// do runs a command and fails the test unless it completes GOOD.
func do(t testing.TB, s *initiator.Session, cmd *initiator.Command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Do(ctx, cmd); err != nil {
		t.Fatalf("CDB %x: %v", cmd.CDB, err)
	}
	if cmd.Status != 0 {
		t.Fatalf("CDB %x: status %#x sense %x", cmd.CDB, cmd.Status, cmd.Sense)
	}
}

// checkGoroutines fails if goroutines or file descriptors opened by the
// test outlive it.
func checkGoroutines(t *testing.T) { testtarget.CheckLeaks(t) }
