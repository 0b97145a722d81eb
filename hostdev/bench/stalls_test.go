package bench

import (
	"runtime"
	"testing"
	"time"
)

// TestStallMeter: a processor held by a busy goroutine makes the meter's
// goroutine late, and the meter says by how much.
func TestStallMeter(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m := startStallMeter()
	time.Sleep(5 * time.Millisecond)
	busy := time.Now().Add(40 * time.Millisecond)
	x := 0
	for time.Now().Before(busy) {
		x++
	}
	time.Sleep(5 * time.Millisecond)
	if got := m.end(); got < 2*time.Millisecond {
		t.Fatalf("a 40 ms busy loop on the only processor: longest stall %v, want at least 2 ms (%d)", got, x)
	}
}

// TestGCStats: a collection during the run is counted, with a pause.
func TestGCStats(t *testing.T) {
	before := readGC()
	runtime.GC()
	runtime.GC()
	cycles, pause := readGC().since(before)
	if cycles < 2 || pause <= 0 {
		t.Fatalf("after two runtime.GC: %d cycles, longest pause %v", cycles, pause)
	}
}
