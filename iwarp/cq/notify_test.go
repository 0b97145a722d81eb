package cq

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// notified reports whether a notification is waiting on c.
func notified(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func drain[T any](r *Ring[T]) (n int) {
	for {
		if _, ok := r.Poll(); !ok {
			return n
		}
		n++
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkGoroutines fails t if goroutines started since baseline are still
// running at the end of the test.
func checkGoroutines(t *testing.T) {
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() {
		waitFor(t, "the test's goroutines to exit", func() bool { return runtime.NumGoroutine() <= baseline })
	})
}

func TestArm(t *testing.T) {
	type step struct {
		do   string // "arm", "armSol", "push", "pushSol", "drain"
		want bool   // a notification is waiting after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"next completion", []step{{"arm", false}, {"push", true}}},
		{"one-shot", []step{{"arm", false}, {"push", true}, {"push", false}}},
		{"not armed", []step{{"push", false}, {"drain", false}, {"push", false}}},
		{"solicited only", []step{{"armSol", false}, {"push", false}, {"push", false}, {"pushSol", true}}},
		{"already queued", []step{{"push", false}, {"arm", true}}},
		{"solicited already queued", []step{{"pushSol", false}, {"push", false}, {"armSol", true}}},
		{"solicited polled", []step{{"pushSol", false}, {"drain", false}, {"armSol", false}, {"push", false}}},
		{"non-solicited queued", []step{{"push", false}, {"armSol", false}, {"pushSol", true}}},
		{"widened", []step{{"armSol", false}, {"arm", false}, {"push", true}}},
		{"not narrowed", []step{{"arm", false}, {"armSol", false}, {"push", true}}},
		{"re-armed", []step{{"arm", false}, {"push", true}, {"drain", false}, {"arm", false}, {"pushSol", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing[int](t, 8)
			for i, s := range tt.steps {
				switch s.do {
				case "arm", "armSol":
					if err := r.Arm(s.do == "armSol"); err != nil {
						t.Fatal(err)
					}
				case "push", "pushSol":
					if err := r.Push(i, s.do == "pushSol"); err != nil {
						t.Fatal(err)
					}
				case "drain":
					drain(r)
				}
				if got := notified(r.Notify()); got != s.want {
					t.Fatalf("step %d (%s): notified %v, want %v", i, s.do, got, s.want)
				}
			}
		})
	}
}

// The race of the brief: a completion that lands between an empty Poll and
// the wait is not missed, by Wait or by Arm.
func TestCompletionBeforeWait(t *testing.T) {
	r := newRing[int](t, 8)
	if _, ok := r.Poll(); ok {
		t.Fatal("not empty")
	}
	r.Push(1, false) // the producer gets in between
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.Wait(ctx, false); err != nil {
		t.Fatalf("Wait with a completion queued: %v", err)
	}
	if err := r.Arm(false); err != nil || !notified(r.Notify()) {
		t.Fatalf("Arm with a completion queued sent no notification (%v)", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx, false); err != nil {
		t.Fatalf("Wait with a completion queued and a done context: %v", err)
	}
}

func TestWaitSolicited(t *testing.T) {
	checkGoroutines(t)
	r := newRing[int](t, 8)
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background(), true) }()
	waitFor(t, "the waiter", func() bool { return r.nwait.Load() == 1 })
	r.Push(1, false)
	r.Push(2, false)
	select {
	case err := <-done:
		t.Fatalf("solicited-only Wait woke for ordinary completions (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.Push(3, true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(context.Background(), true); err != nil { // still queued
		t.Fatal(err)
	}
	drain(r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("solicited-only Wait after polling the solicited completion: %v", err)
	}
	if n := r.nwait.Load(); n != 0 {
		t.Errorf("%d waiters linked after Wait returned", n)
	}
}

// A push wakes exactly one waiter, and only one whose condition it meets.
func TestWakesExactlyOne(t *testing.T) {
	checkGoroutines(t)
	r := newRing[int](t, 16)
	const n = 5
	var woken atomic.Int32
	var wg sync.WaitGroup
	sol := make(chan error, 1)
	go func() { sol <- r.Wait(context.Background(), true) }()
	waitFor(t, "the solicited waiter", func() bool { return r.nwait.Load() == 1 })
	for range n {
		wg.Go(func() {
			if err := r.Wait(context.Background(), false); err != nil {
				t.Error(err)
			}
			woken.Add(1)
		})
	}
	waitFor(t, "the waiters", func() bool { return r.nwait.Load() == n+1 })
	for i := 1; i <= n; i++ {
		r.Push(i, false)
		waitFor(t, "a waiter to wake", func() bool { return woken.Load() >= int32(i) })
		time.Sleep(20 * time.Millisecond)
		if w := woken.Load(); w != int32(i) {
			t.Fatalf("%d pushes woke %d waiters", i, w)
		}
	}
	wg.Wait()
	select {
	case err := <-sol:
		t.Fatalf("ordinary completions woke the solicited-only waiter (%v)", err)
	default:
	}
	r.Push(0, true)
	if err := <-sol; err != nil {
		t.Fatal(err)
	}
}

// A waiter that gives up after a producer woke it hands the wake-up on.
func TestCancelPassesWakeup(t *testing.T) {
	r := newRing[int](t, 8)
	w1, w2 := &waiter{c: make(chan struct{}, 1)}, &waiter{c: make(chan struct{}, 1)}
	r.mu.Lock()
	r.link(w1)
	r.link(w2)
	r.mu.Unlock()
	r.Push(1, false) // wakes w1 only
	if len(w1.c) != 1 || len(w2.c) != 0 || w1.linked || !w2.linked {
		t.Fatalf("after a push: w1 %d/%v, w2 %d/%v", len(w1.c), w1.linked, len(w2.c), w2.linked)
	}
	r.cancel(w1, true) // w1's context ended before it received
	if len(w2.c) != 1 || w2.linked || r.nwait.Load() != 0 {
		t.Fatalf("the wake-up was not passed on: w2 %d/%v, %d waiters", len(w2.c), w2.linked, r.nwait.Load())
	}
}

func TestWaitContext(t *testing.T) {
	checkGoroutines(t)
	r := newRing[int](t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty ring: %v, want DeadlineExceeded", err)
	}
	if n := r.nwait.Load(); n != 0 {
		t.Errorf("%d waiters linked after a timed-out Wait", n)
	}
}

func TestClose(t *testing.T) {
	checkGoroutines(t)
	r := newRing[int](t, 8)
	const n = 4
	errs := make(chan error, n+1)
	for range n {
		go func() { errs <- r.Wait(context.Background(), false) }()
	}
	go func() { errs <- r.Wait(context.Background(), true) }()
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the waiters", func() bool { return r.nwait.Load() == n+2 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for range n + 1 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("Wait across Close: %v, want ErrClosed", err)
		}
	}
	if _, open := <-r.Notify(); open {
		t.Error("Notify's channel is open after Close")
	}
	if err := r.Push(1, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Push after Close: %v", err)
	}
	if err := r.Arm(false); !errors.Is(err, ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}
	if err := r.Wait(context.Background(), false); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := r.nwait.Load(); n != 0 {
		t.Errorf("%d waiters linked after Close", n)
	}
}

// Completions queued before Close can still be waited for and polled.
func TestCloseDrains(t *testing.T) {
	r := newRing[int](t, 8)
	r.Push(1, false)
	r.Push(2, true)
	r.Close()
	if err := r.Wait(context.Background(), true); err != nil {
		t.Fatalf("Wait with completions left after Close: %v", err)
	}
	if n := drain(r); n != 2 {
		t.Fatalf("polled %d after Close, want 2", n)
	}
	if err := r.Wait(context.Background(), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on a drained closed ring: %v", err)
	}
}

// No lost wake-ups: producers hand completions one at a time to consumers
// that drain and wait, so every hand-over races with a consumer going to
// sleep. A lost wake-up stalls a hand-over and fails the test.
func TestNoLostWakeups(t *testing.T) {
	iters, limit := 20000, 2*time.Second
	if testing.Short() {
		iters, limit = 2000, 500*time.Millisecond
	}
	type consumer func(ctx context.Context, r *Ring[int]) error
	byWait := func(solicited bool) consumer {
		return func(ctx context.Context, r *Ring[int]) error { return r.Wait(ctx, solicited) }
	}
	byArm := func(ctx context.Context, r *Ring[int]) error {
		if err := r.Arm(false); err != nil {
			return err
		}
		select {
		case <-r.Notify():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tests := []struct {
		name      string
		consumers int
		wait      consumer
		solicited bool // the handed-over completion is solicited, after an ordinary one
		producers int
	}{
		{"Wait", 1, byWait(false), false, 1},
		{"Wait, 3 consumers", 3, byWait(false), false, 1},
		{"Wait, 2 producers, 3 consumers", 3, byWait(false), false, 2},
		{"solicited Wait", 1, byWait(true), true, 1},
		{"solicited Wait, 2 consumers", 2, byWait(true), true, 2},
		{"Arm and Notify", 1, byArm, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			r := newRing[int](t, 64)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			acks := make(chan int, 64)
			var cg sync.WaitGroup
			for range tt.consumers {
				cg.Go(func() {
					for {
						for {
							v, ok := r.Poll()
							if !ok {
								break
							}
							if v >= 0 {
								acks <- v
							}
						}
						wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
						err := tt.wait(wctx, r)
						wcancel()
						switch {
						case ctx.Err() != nil || errors.Is(err, ErrClosed):
							return
						case err != nil:
							t.Errorf("lost wake-up: a consumer slept through a completion (%v)", err)
							return
						}
					}
				})
			}
			var pg sync.WaitGroup
			start := time.Now()
			for p := range tt.producers {
				pg.Go(func() {
					for i := p; i < iters && time.Since(start) < limit; i += tt.producers {
						if tt.solicited {
							push(t, r, -1, false) // must not wake solicited-only consumers
						}
						push(t, r, i, tt.solicited)
						select {
						case <-acks:
						case <-time.After(10 * time.Second):
							t.Errorf("lost wake-up: completion %d not taken in 10s", i)
							return
						}
					}
				})
			}
			pg.Wait()
			r.Close()
			cg.Wait()
		})
	}
}

func BenchmarkWaitWake(b *testing.B) {
	r := newRing[int](b, 64)
	acks := make(chan struct{})
	go func() {
		for {
			if err := r.Wait(context.Background(), false); err != nil {
				return
			}
			for {
				if _, ok := r.Poll(); !ok {
					break
				}
				acks <- struct{}{}
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		r.Push(1, false)
		<-acks
	}
	r.Close()
}

// PushQuiet queues without waking: an armed notification or a sleeping
// waiter stays asleep, but Arm, Wait and Poll after it see the completion,
// and the next Push wakes. A Push between the since count and PushQuiet
// makes it wake.
func TestPushQuiet(t *testing.T) {
	checkGoroutines(t)
	r, err := New[int](8)
	if err != nil {
		t.Fatal(err)
	}
	// An armed notification.
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := r.PushQuiet(1, r.Loud()); err != nil {
		t.Fatal(err)
	}
	if notified(r.Notify()) {
		t.Fatal("PushQuiet notified")
	}
	if err := r.Push(2, false); err != nil {
		t.Fatal(err)
	}
	if !notified(r.Notify()) {
		t.Fatal("Push after PushQuiet did not notify")
	}
	if n := drain(r); n != 2 {
		t.Fatalf("polled %d completions, want 2", n)
	}
	// A sleeping waiter.
	woke := make(chan error, 1)
	go func() { woke <- r.Wait(context.Background(), false) }()
	waitFor(t, "the waiter to sleep", func() bool { return r.nwait.Load() == 1 })
	if err := r.PushQuiet(3, r.Loud()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		t.Fatalf("PushQuiet woke a waiter (%v)", err)
	case <-time.After(10 * time.Millisecond):
	}
	if err := r.Push(4, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Push after PushQuiet did not wake the waiter")
	}
	drain(r)
	// The answer came first: the consumer took it and armed again, so the
	// quiet completion must wake it.
	since := r.Loud()
	if err := r.Push(5, false); err != nil {
		t.Fatal(err)
	}
	drain(r)
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := r.PushQuiet(6, since); err != nil {
		t.Fatal(err)
	}
	if !notified(r.Notify()) {
		t.Fatal("PushQuiet after a Push since its count did not notify")
	}
	drain(r)
	// Level-triggered: a quiet completion already queued is seen at once.
	if err := r.PushQuiet(7, r.Loud()); err != nil {
		t.Fatal(err)
	}
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	if !notified(r.Notify()) {
		t.Fatal("Arm with a quiet completion queued did not notify")
	}
	if err := r.Wait(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

// PushHeld queues without a notification; Wake sends the one it left out;
// Disarm withdraws an Arm, and the next Arm (level-triggered) notifies at
// once for what was queued meanwhile.
func TestPushHeld(t *testing.T) {
	r, err := New[int](8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := r.PushHeld(1, false); err != nil {
		t.Fatal(err)
	}
	if notified(r.Notify()) {
		t.Fatal("PushHeld notified")
	}
	r.Wake()
	if !notified(r.Notify()) {
		t.Fatal("Wake after PushHeld did not notify the armed consumer")
	}
	drain(r)

	// The inline consumer's sequence: disarm, poll what is held, arm again.
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	r.PushHeld(2, false)
	r.Disarm()
	if n := drain(r); n != 1 {
		t.Fatalf("polled %d, want 1", n)
	}
	r.Push(3, false) // what the consumer's own posts complete: no one armed
	if notified(r.Notify()) {
		t.Fatal("a Push after Disarm notified")
	}
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	if !notified(r.Notify()) {
		t.Fatal("Arm with a completion queued did not notify")
	}
	drain(r)
	r.Wake() // nothing queued, no one armed: nothing
	if notified(r.Notify()) {
		t.Fatal("Wake with nothing armed notified")
	}
}

// A PushHeld counts as loud for PushQuiet: a quiet completion pushed after
// a held one, which a consumer may already have polled, wakes it.
func TestPushQuietAfterHeld(t *testing.T) {
	r, err := New[int](8)
	if err != nil {
		t.Fatal(err)
	}
	since := r.Loud()
	r.PushHeld(1, false)
	drain(r)
	if err := r.Arm(false); err != nil {
		t.Fatal(err)
	}
	r.PushQuiet(2, since)
	if !notified(r.Notify()) {
		t.Fatal("PushQuiet after a PushHeld did not notify")
	}
}
