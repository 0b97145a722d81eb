package mem

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blocked reports whether done stays open for a while.
func blocked(done <-chan error) bool {
	select {
	case <-done:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// Deregister waits for a critical section that holds the region's memory; new
// checks fail as soon as it has begun.
func TestDeregisterWaitsForReader(t *testing.T) {
	tab := NewTable(0)
	m, err := Anonymous(pageSize)
	if err != nil {
		t.Fatal(err)
	}
	pd := NewPD()
	mr := register(t, tab, pd, m, 0, 100, LocalWrite|RemoteWrite, ZeroBased)
	r, other := tab.NewReader(), tab.NewReader()
	defer r.Close()
	defer other.Close()

	r.Enter()
	b, f := r.Check(mr.STag(), pd, 0, 100, RemoteWrite)
	if f != FaultNone {
		t.Fatal(f)
	}
	done := make(chan error, 1)
	go func() { done <- tab.Deregister(context.Background(), mr) }()
	if !blocked(done) {
		t.Fatal("Deregister returned while a critical section held the region")
	}
	other.Enter()
	if _, f := other.Check(mr.STag(), pd, 0, 100, RemoteWrite); f != FaultInvalidSTag {
		t.Errorf("Check during Deregister: %v, want %v", f, FaultInvalidSTag)
	}
	other.Exit()
	if err := m.Close(); !errors.Is(err, ErrBusy) {
		t.Errorf("Close during Deregister: %v, want ErrBusy", err)
	}
	copy(b, "still mapped") // the slice is still good until Exit
	r.Exit()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deregister did not return after Exit")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Deregister: %v", err)
	}
}

// A Deregister whose context ends leaves the MR invalid but registered; a
// second call finishes it.
func TestDeregisterContext(t *testing.T) {
	tab := NewTable(1)
	m := anon(t, pageSize)
	pd := NewPD()
	mr := register(t, tab, pd, m, 0, 100, RemoteRead, ZeroBased)
	r := tab.NewReader()
	defer r.Close()
	r.Enter()
	if _, f := r.Check(mr.STag(), pd, 0, 1, RemoteRead); f != FaultNone {
		t.Fatal(f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tab.Deregister(ctx, mr); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Deregister with a critical section open: %v, want DeadlineExceeded", err)
	}
	if mr.Valid() || tab.Registered() != 1 {
		t.Errorf("after a timed-out Deregister: valid %v, registered %d; want invalid and 1", mr.Valid(), tab.Registered())
	}
	if _, err := tab.Register(pd, m, 0, 1, 0, ZeroBased); !errors.Is(err, ErrNoSTags) {
		t.Errorf("index reused before the grace period ended: %v", err)
	}
	if err := m.Close(); !errors.Is(err, ErrBusy) {
		t.Errorf("Close after a timed-out Deregister: %v, want ErrBusy", err)
	}
	r.Exit()
	deregister(t, tab, mr)
	if tab.Registered() != 0 {
		t.Errorf("registered %d after the second Deregister", tab.Registered())
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// Invalidation does not wait, even from inside a section that holds the
// region; Deregister then waits for that section.
func TestInvalidateInsideSection(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd := NewPD()
	mr := register(t, tab, pd, m, 0, 100, RemoteInvalidate|RemoteRead, ZeroBased)
	r := tab.NewReader()
	defer r.Close()
	r.Enter()
	if _, f := r.Check(mr.STag(), pd, 0, 1, RemoteRead); f != FaultNone {
		t.Fatal(f)
	}
	if f := tab.RemoteInvalidate(mr.STag(), pd); f != FaultNone {
		t.Fatal(f)
	}
	if _, f := r.Check(mr.STag(), pd, 0, 1, RemoteRead); f != FaultInvalidSTag {
		t.Errorf("Check after invalidation in the same section: %v, want %v", f, FaultInvalidSTag)
	}
	done := make(chan error, 1)
	go func() { done <- tab.Deregister(context.Background(), mr) }()
	if !blocked(done) {
		t.Fatal("Deregister returned while a section held the invalidated region")
	}
	r.Exit()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Deregister waits only for holders of its region: a section stuck holding
// another region, and readers busy with the same STag, do not hold it up.
func TestDeregisterWaitsOnlyForHolders(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd := NewPD()
	stuck := register(t, tab, pd, m, 0, 100, RemoteRead, ZeroBased)
	s := tab.NewReader()
	defer s.Close()
	s.Enter()
	if _, f := s.Check(stuck.STag(), pd, 0, 1, RemoteRead); f != FaultNone {
		t.Fatal(f)
	}
	defer s.Exit()

	var stop atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop.Store(true)
	for range 100 {
		mr := register(t, tab, pd, m, 0, 100, RemoteRead, ZeroBased)
		stag := mr.STag()
		for range 2 { // readers that check this very STag all the time
			r := tab.NewReader()
			wg.Go(func() {
				defer r.Close()
				for !stop.Load() {
					r.Enter()
					_, f := r.Check(stag, pd, 0, 100, RemoteRead)
					r.Exit()
					if f != FaultNone {
						return
					}
					runtime.Gosched() // as a receive goroutine waits for the network
				}
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := tab.Deregister(ctx, mr); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}

// A section holds at most MaxHeld distinct regions; the same region again
// takes no new slot.
func TestMaxHeld(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd := NewPD()
	var mrs []*MR
	for range MaxHeld + 1 {
		mrs = append(mrs, register(t, tab, pd, m, 0, 100, RemoteRead, ZeroBased))
	}
	r := tab.NewReader()
	defer r.Close()
	r.Enter()
	for _, mr := range mrs[:MaxHeld] {
		for range 3 {
			if _, f := r.Check(mr.STag(), pd, 0, 1, RemoteRead); f != FaultNone {
				t.Fatal(f)
			}
		}
	}
	mustPanic(t, "Check of one region too many", func() { r.Check(mrs[MaxHeld].STag(), pd, 0, 1, RemoteRead) })
	r.Exit()
	r.Enter() // Exit released them all
	if _, f := r.Check(mrs[MaxHeld].STag(), pd, 0, 1, RemoteRead); f != FaultNone {
		t.Fatal(f)
	}
	r.Exit()
	deregister(t, tab, mrs...)
}

func TestReaderFree(t *testing.T) {
	tab := NewTable(16)
	pd := NewPD()
	m, err := Anonymous(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var mrs []*MR
	for i := range MaxHeld + 1 {
		mr, err := tab.Register(pd, m, i*4096, 4096, RemoteRead, ZeroBased)
		if err != nil {
			t.Fatal(err)
		}
		mrs = append(mrs, mr)
	}
	defer tab.Deregister(context.Background(), mrs...)
	r := tab.NewReader()
	defer r.Close()
	r.Enter()
	for i := range MaxHeld {
		if r.Free() != MaxHeld-i {
			t.Fatalf("after %d holds Free = %d", i, r.Free())
		}
		if _, f := r.Check(mrs[i].STag(), pd, 0, 1, RemoteRead); f != FaultNone {
			t.Fatal(f)
		}
		// Checking a region already held takes no further slot.
		if _, f := r.Check(mrs[i].STag(), pd, 1, 1, RemoteRead); f != FaultNone || r.Free() != MaxHeld-i-1 {
			t.Fatalf("re-check: %v, Free %d", f, r.Free())
		}
	}
	r.Exit()
	if r.Free() != MaxHeld {
		t.Fatalf("after Exit Free = %d", r.Free())
	}
}
