package transport_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
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
			other := newRig(t, rigOpts{stores: []blockdev.Store{&countingStore{Store: st, borrowed: true}}, alua: groups(2, lu.Standby, c.second)})
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

// countingStore counts the writes that reach it: which gateway a command
// went through.
type countingStore struct {
	blockdev.Store
	writes atomic.Int64
	// borrowed: another rig's store too, which that rig closes (its
	// cleanup runs after this one's, with its server maybe still holding
	// the store).
	borrowed bool
}

func (c *countingStore) Close() error {
	if c.borrowed {
		return nil
	}
	return c.Store.Close()
}

func (c *countingStore) WriteAt(p []byte, off int64) error {
	c.writes.Add(1)
	return c.Store.WriteAt(p, off)
}

// TestRoundRobin: a round-robin session to two gateways of one LU sends
// its commands down both while both are active/optimized, none down an
// active/non-optimized one while an active/optimized one is up, and keeps
// verified I/O going without an error while a path is cut, then takes the
// path back once it answers again.
func TestRoundRobin(t *testing.T) {
	checkGoroutines(t)
	groups := func(local uint16, states ...lu.ALUAState) func(*lu.Target) error {
		return func(tg *lu.Target) error {
			return tg.SetPortGroups(local, []lu.PortGroup{{ID: 1, State: states[0]}, {ID: 2, State: states[1]}})
		}
	}
	for _, c := range []struct {
		name   string
		second lu.ALUAState
	}{{"both-optimized", lu.ActiveOptimized}, {"second-non-optimized", lu.ActiveNonOptimized}} {
		t.Run(c.name, func(t *testing.T) {
			st, err := blockdev.NewMemory(16 << 20)
			if err != nil {
				t.Fatal(err)
			}
			s1, s2 := &countingStore{Store: st}, &countingStore{Store: st, borrowed: true}
			r1 := newRig(t, rigOpts{stores: []blockdev.Store{s1}, alua: groups(1, lu.ActiveOptimized, c.second)})
			r2 := newRig(t, rigOpts{stores: []blockdev.Store{s2}, alua: groups(2, lu.ActiveOptimized, c.second)})
			a := newCutProxy(t, r1.addr)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := initiator.Dial(ctx, r1.dev, "tcp", a.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
				TargetName: targetName, RecoveryTimeout: 20 * time.Second, Log: quietLog(), Buffers: 8 << 20,
				Alternates: []string{r2.addr}, RoundRobin: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if ps := s.Paths(); len(ps) != 2 || !ps[0].Up || !ps[1].Up || ps[0].State != "active/optimized" || ps[1].State != lu.ALUAState(c.second).String() {
				t.Fatalf("paths %+v", ps)
			}
			wbuf, _ := s.Alloc(4096)
			for i := range 40 {
				wc := &initiator.Command{CDB: write16(uint64(i*8), 8), Dir: initiator.DataOut, Data: wbuf}
				if err := s.Do(ctx, wc); err != nil || wc.Status != 0 {
					t.Fatalf("write %d: %v status %#x", i, err, wc.Status)
				}
			}
			s.Free(wbuf)
			w1, w2 := s1.writes.Load(), s2.writes.Load()
			switch {
			case c.second == lu.ActiveOptimized && (w1 < 10 || w2 < 10):
				t.Fatalf("writes through the gateways: %d and %d, want both used", w1, w2)
			case c.second != lu.ActiveOptimized && w2 != 0:
				t.Fatalf("%d writes went through the active/non-optimized gateway while the optimized one was up", w2)
			}
			// Cut path 1 under eight writers: nothing fails.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := pattern(s, uint64(4096+w*512), 16<<10, int64(w*1000+i)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			time.Sleep(300 * time.Millisecond)
			a.refuse.Store(true)
			a.cut()
			// The writes outstanding on the cut path wait DefaultTime2Wait
			// (2 s) before they go down the other; new ones go at once.
			time.Sleep(300 * time.Millisecond)
			before := s2.writes.Load()
			time.Sleep(2500 * time.Millisecond)
			if s2.writes.Load() == before {
				t.Error("no write went through the second gateway while the first was cut")
			}
			a.refuse.Store(false)
			deadline := time.Now().Add(15 * time.Second)
			for ps := s.Paths(); !ps[0].Up; ps = s.Paths() {
				if time.Now().After(deadline) {
					t.Fatalf("path 1 did not come back: %+v", ps)
				}
				time.Sleep(50 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}
