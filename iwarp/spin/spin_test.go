package spin

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

const base = 50 * time.Microsecond

// answer is one exchange: this end writes at w and the peer's next message
// arrives d later.
func answer(t *Turnaround, w int64, d time.Duration) {
	t.lastWrite.Store(w)
	t.Arrived(w+int64(d), base)
}

func TestSpinFollowsTurnaround(t *testing.T) {
	for _, c := range []struct {
		turn, want time.Duration
	}{
		{10 * time.Microsecond, base}, // quicker than the base: the base
		{25 * time.Microsecond, base}, // twice it is the base
		{40 * time.Microsecond, 80 * time.Microsecond},
		{75 * time.Microsecond, 150 * time.Microsecond},  // the mount's QD1
		{150 * time.Microsecond, 200 * time.Microsecond}, // within the bound: the bound
		{200 * time.Microsecond, 200 * time.Microsecond},
		{201 * time.Microsecond, base}, // beyond it: not worth the CPU
		{time.Second, base},
	} {
		var tr Turnaround
		if got := tr.Spin(base); got != base {
			t.Fatalf("no sample yet: spin %v, want the base", got)
		}
		w := int64(1)
		for range 50 {
			answer(&tr, w, c.turn)
			w += int64(time.Millisecond)
		}
		if got := tr.Spin(base); got != c.want {
			s, n := tr.Smoothed()
			t.Errorf("turnaround %v: spin %v, want %v (smoothed %v over %d)", c.turn, got, c.want, s, n)
		}
	}
}

// TestSpinSamples: only a message that follows a write of this end is a
// sample; an idle gap counts as twice the bound, so one gap moves the
// estimate by an eighth of that.
func TestSpinSamples(t *testing.T) {
	var tr Turnaround
	tr.Arrived(5, base) // nothing written yet
	if _, n := tr.Smoothed(); n != 0 {
		t.Fatalf("%d samples before any write", n)
	}
	answer(&tr, 100, 80*time.Microsecond)
	tr.Arrived(100+int64(90*time.Microsecond), base) // a second message, no write between
	if s, n := tr.Smoothed(); n != 1 || s != 80*time.Microsecond {
		t.Fatalf("after one answer and one more message: %v over %d samples, want 80µs over 1", s, n)
	}
	answer(&tr, int64(time.Second), time.Hour)
	hi := 2 * MaxFactor * base
	want := 80*time.Microsecond + (hi-80*time.Microsecond)/8
	if s, _ := tr.Smoothed(); s != want {
		t.Fatalf("after an hour's gap: smoothed %v, want %v", s, want)
	}
	// It comes back within a few answers.
	w := int64(2 * time.Hour)
	for range 8 {
		answer(&tr, w, 80*time.Microsecond)
		w += int64(time.Millisecond)
	}
	if got := tr.Spin(base); got < 160*time.Microsecond || got > 200*time.Microsecond {
		t.Fatalf("8 answers after the gap: spin %v, want 160-200µs", got)
	}
	// A clock read that goes backwards between threads is no turnaround.
	answer(&tr, w, -time.Microsecond)
	if s, _ := tr.Smoothed(); s < 0 {
		t.Fatalf("smoothed %v", s)
	}
}

func TestSpinOff(t *testing.T) {
	var tr Turnaround
	answer(&tr, 1, 75*time.Microsecond)
	if got := tr.Spin(0); got != 0 {
		t.Fatalf("base 0: spin %v", got)
	}
}

func TestWrote(t *testing.T) {
	var tr Turnaround
	if tr.LastWrite() != 0 {
		t.Fatal("a write before any")
	}
	before := Now()
	tr.Wrote()
	if w := tr.LastWrite(); w < before || w > Now() {
		t.Fatalf("LastWrite %d outside [%d, now]", w, before)
	}
}

// TestPoll: Poll ends on an arrival (a sample), on try's error, on stop,
// and when the spin is over.
func TestPoll(t *testing.T) {
	var turn Turnaround
	turn.Wrote()
	tries := 0
	got, err := turn.Poll(time.Hour, func() (bool, error) { tries++; return tries == 3, nil }, nil)
	if !got || err != nil || tries != 3 {
		t.Fatalf("arrival on the third try: got %v, %v after %d tries", got, err, tries)
	}
	if _, n := turn.Smoothed(); n != 1 {
		t.Fatalf("%d samples after an answer to a write, want 1", n)
	}
	boom := errors.New("boom")
	if got, err := turn.Poll(time.Hour, func() (bool, error) { return false, boom }, nil); got || err != boom {
		t.Fatalf("try's error: got %v, %v", got, err)
	}
	var stop atomic.Bool
	stop.Store(true)
	tries = 0
	if got, err := turn.Poll(time.Hour, func() (bool, error) { tries++; return false, nil }, &stop); got || err != nil || tries != 1 {
		t.Fatalf("stop set: got %v, %v after %d tries", got, err, tries)
	}
	// A spin of a nanosecond, from a write long ago: over after one try.
	tries = 0
	if got, err := turn.Poll(time.Nanosecond, func() (bool, error) { tries++; return false, nil }, nil); got || err != nil || tries > 100 {
		t.Fatalf("spin over: got %v, %v after %d tries", got, err, tries)
	}
}
