package testtarget

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// CheckLeaks fails the test if goroutines or file descriptors opened after
// this call outlive the test's cleanups. Call it first, so that its check
// runs after every other cleanup.
func CheckLeaks(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	fds := openFDs(t)
	t.Cleanup(func() {
		defer func() {
			// Sockets of connections that ended close as their
			// goroutines finish: give them the same grace.
			deadline := time.Now().Add(5 * time.Second)
			for openFDs(t) > fds && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := openFDs(t); n > fds {
				t.Errorf("%d file descriptors leaked (%d open before, %d after)", n-fds, fds, n)
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines leaked:\n%s", n-before, ourStacks(string(buf)))
		}
	})
}

// ourStacks keeps the goroutine stacks that pass through this module.
func ourStacks(s string) string {
	var out []string
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "ddpstore") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}
