// Package testtarget runs an iSER target on loopback inside a test and logs
// an initiator session in to it, for the tests of packages that sit on a
// session (hostdev/remote, hostdev/lunfs).
package testtarget

import (
	"context"
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

// Names of the target and initiator.
const (
	TargetName    = "iqn.2026-11.io.ddpstore:test"
	InitiatorName = "iqn.2026-11.io.ddpstore:test-host"
)

// Target is a running target whose LUN i is Stores[i].
type Target struct {
	Addr   string
	Stores []blockdev.Store
	dev    *iwarp.Device
}

// Start serves stores as LUNs 0, 1, ... of one target until the test ends.
func Start(t testing.TB, stores ...blockdev.Store) *Target {
	t.Helper()
	tt := &Target{Stores: stores, dev: iwarp.NewDevice(0)}
	luns := map[uint16]*lu.LU{}
	for i, st := range stores {
		l, err := lu.New(uint64(i+1), st)
		if err != nil {
			t.Fatal(err)
		}
		luns[uint16(i)] = l
	}
	tg, err := lu.NewTarget(TargetName, luns)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tt.dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tt.Addr = l.Addr().String()
	srv, err := target.NewServer(tt.dev, target.Config{
		Exports: []target.Export{{Target: tg}},
		Portals: []login.Portal{{Addr: tt.Addr, TPGT: 1}},
		Log:     Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		tt.dev.Close()
	})
	return tt
}

// Memory is a memory store of size octets, closed when the test ends.
func Memory(t testing.TB, size int64) *blockdev.Memory {
	t.Helper()
	st, err := blockdev.NewMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Dial logs a session in to the target; it is closed when the test ends.
func (tt *Target) Dial(t testing.TB, cfg initiator.Config) *initiator.Session {
	t.Helper()
	if cfg.InitiatorName == "" {
		cfg.InitiatorName = InitiatorName
	}
	cfg.TargetName = TargetName
	if cfg.Log == nil {
		cfg.Log = Quiet()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, tt.dev, "tcp", tt.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Quiet is a log that shows only errors.
func Quiet() *log.Entry {
	l := log.New()
	l.SetLevel(log.ErrorLevel)
	return log.NewEntry(l)
}
