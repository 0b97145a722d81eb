// Package burst releases many callers at once, for tests of what a
// program does with work that arrives together (batching).
package burst

import (
	"sync"
	"time"
)

// Run calls f(0) to f(n-1), each in its own goroutine, all released
// together once every goroutine has started and a moment more has passed
// (so that each waits on the release, not on its start), and returns the
// errors they returned, in no order.
func Run(n int, f func(i int) error) []error {
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	ready.Wait()
	time.Sleep(10 * time.Millisecond)
	close(start)
	done.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
