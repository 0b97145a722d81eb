package burst

import (
	"fmt"
	"sync"
	"testing"
)

// TestRun: each index is called once, and every error comes back.
func TestRun(t *testing.T) {
	const n = 32
	var mu sync.Mutex
	seen := map[int]int{}
	errs := Run(n, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i%4 == 0 {
			return fmt.Errorf("call %d", i)
		}
		return nil
	})
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("index %d called %d times", i, seen[i])
		}
	}
	if len(errs) != n/4 {
		t.Fatalf("%d errors, want %d: %v", len(errs), n/4, errs)
	}
}
