package lunfs

import (
	"testing"
	"time"
)

// TestReadTurn: the turn goes to the worker that began waiting last, and
// is free again when nobody waits.
func TestReadTurn(t *testing.T) {
	rt := newReadTurn(3)
	rt.take(make(chan struct{}, 1)) // free: at once
	got := make(chan int, 2)
	for i := 1; i <= 2; i++ {
		me := make(chan struct{}, 1)
		go func() { rt.take(me); got <- i }()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			rt.mu.Lock()
			n := len(rt.idle)
			rt.mu.Unlock()
			if n == i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("worker %d never waited", i)
			}
		}
	}
	for _, want := range []int{2, 1} {
		rt.pass()
		select {
		case w := <-got:
			if w != want {
				t.Fatalf("the turn went to worker %d, want %d (the last to wait)", w, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no worker took the turn; want %d", want)
		}
	}
	rt.pass()
	done := make(chan struct{})
	go func() { rt.take(make(chan struct{}, 1)); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn, passed with nobody waiting, is not free")
	}
}
