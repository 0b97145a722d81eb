package hostdev

import (
	"os"
	"runtime"
	"testing"
)

// TestBlockingProcs: a serving process confined to one CPU still gets a
// second Go processor to poll the network while a thread blocks.
func TestBlockingProcs(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment, which BlockingProcs obeys")
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	BlockingProcs()
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("GOMAXPROCS after BlockingProcs with one processor = %d, want 2", n)
	}
	runtime.GOMAXPROCS(3)
	BlockingProcs()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("BlockingProcs lowered GOMAXPROCS 3 to %d", n)
	}
}
