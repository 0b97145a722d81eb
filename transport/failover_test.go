package transport_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/lu"
)

// TestFailover: a session with two portals of one target (two gateways,
// here two forwarders to the same target) survives the death of the one
// it uses: with 8 verifying writers running, gateway A is cut and refuses
// new connections, and the session goes on through B; then B dies and A
// is back, and it returns to A. No caller sees an error or wrong data.
func TestFailover(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	a, b := newCutProxy(t, r.addr), newCutProxy(t, r.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, "tcp", a.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, RecoveryTimeout: 20 * time.Second, Log: quietLog(), Buffers: 8 << 20,
		Alternates: []string{b.ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := pattern(s, uint64(w*512), 64<<10, int64(w*1000+i)); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	waitPortal := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for s.Portal() != want || s.Err() != nil {
			if time.Now().After(deadline) || s.Err() != nil {
				t.Fatalf("the session is on %s (err %v), want %s", s.Portal(), s.Err(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// It does I/O there.
		if err := pattern(s, 8*512, 4096, 99); err != nil {
			t.Fatalf("I/O on %s: %v", want, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	a.refuse.Store(true)
	a.cut()
	waitPortal(b.ln.Addr().String())
	time.Sleep(300 * time.Millisecond)
	a.refuse.Store(false)
	b.refuse.Store(true)
	b.cut()
	waitPortal(a.ln.Addr().String())
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a caller saw the failover: %v", err)
	}
}

// TestDialFailover: Dial logs in at the next portal when the first cannot
// be reached, and when none can, says why for the first and the others.
func TestDialFailover(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{1 << 20}})
	dead := newCutProxy(t, r.addr)
	dead.refuse.Store(true)
	deadAddr := dead.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := initiator.Config{InitiatorName: initiatorName, TargetName: targetName, Log: quietLog(), Buffers: 1 << 20,
		Alternates: []string{r.addr}}
	s, err := initiator.Dial(ctx, r.dev, "tcp", deadAddr, cfg)
	if err != nil {
		t.Fatalf("Dial with a live alternate: %v", err)
	}
	if s.Portal() != r.addr {
		t.Errorf("logged in at %s, want %s", s.Portal(), r.addr)
	}
	s.Close()
	dead.ln.Close() // now nothing listens there either
	cfg.Alternates = []string{deadAddr}
	_, err = initiator.Dial(ctx, r.dev, "tcp", "127.0.0.1:1", cfg)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "other portals") || !strings.Contains(err.Error(), deadAddr) {
		t.Errorf("Dial with no portal answering: %v", err)
	}
}

// TestStandbyPortal: two gateways of one LU, the first listed in ALUA
// standby. The session logs in there (login knows nothing of ALUA), its
// first command is refused with TARGET PORT IN STANDBY STATE, and the
// session moves to the active gateway and runs the command there; when
// every gateway is in standby the command ends with that answer instead
// of going round for ever.
func TestStandbyPortal(t *testing.T) {
	checkGoroutines(t)
	groups := func(local uint16, states ...lu.ALUAState) func(*lu.Target) error {
		return func(tg *lu.Target) error {
			return tg.SetPortGroups(local, []lu.PortGroup{{ID: 1, State: states[0]}, {ID: 2, State: states[1]}})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range []struct {
		name      string
		second    lu.ALUAState
		wantMoved bool
	}{
		{"standby-then-active", lu.ActiveOptimized, true},
		{"all-standby", lu.Standby, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := blockdev.NewMemory(16 << 20)
			if err != nil {
				t.Fatal(err)
			}
			standby := newRig(t, rigOpts{stores: []blockdev.Store{st}, alua: groups(1, lu.Standby, c.second)})
			other := newRig(t, rigOpts{stores: []blockdev.Store{st}, alua: groups(2, lu.Standby, c.second)})
			s, err := initiator.Dial(ctx, standby.dev, "tcp", standby.addr, initiator.Config{InitiatorName: initiatorName,
				TargetName: targetName, RecoveryTimeout: 20 * time.Second, Log: quietLog(), Buffers: 8 << 20,
				Alternates: []string{other.addr}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			buf, _ := s.Alloc(4096)
			cmd := &initiator.Command{CDB: read16(0, 8), Dir: initiator.DataIn, Data: buf}
			if err := s.Do(ctx, cmd); err != nil {
				t.Fatal(err)
			}
			moved := cmd.Status == 0 && s.Portal() == other.addr
			if moved != c.wantMoved {
				t.Fatalf("status %#x sense %x, on %s: want moved=%v to %s", cmd.Status, cmd.Sense, s.Portal(), c.wantMoved, other.addr)
			}
			if !c.wantMoved && !initiator.PortUnavailable(cmd.Status, cmd.Sense) {
				t.Fatalf("every gateway in standby: status %#x sense %x, want TARGET PORT IN STANDBY STATE", cmd.Status, cmd.Sense)
			}
		})
	}
}
