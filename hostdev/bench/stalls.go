package bench

import (
	"runtime/metrics"
	"sync"
	"time"
)

// stallMeter measures how late this process's goroutines get to run: a
// goroutine that sleeps stallTick at a time records by how much each sleep
// overran. An I/O latency as long as the longest overrun was the process
// (garbage collection, the scheduler, the host taking the CPU), not the
// target.
type stallMeter struct {
	stop chan struct{}
	done sync.WaitGroup
	max  time.Duration
}

const stallTick = time.Millisecond

func startStallMeter() *stallMeter {
	m := &stallMeter{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTimer(stallTick)
		defer t.Stop()
		for {
			t0 := time.Now()
			t.Reset(stallTick)
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			m.max = max(m.max, time.Since(t0)-stallTick)
		}
	}()
	return m
}

// end stops the meter and returns the longest overrun.
func (m *stallMeter) end() time.Duration {
	close(m.stop)
	m.done.Wait()
	return m.max
}

// gcStats reads the garbage collector's cycles so far and the histogram of
// its stop-the-world pauses.
type gcStats struct {
	samples []metrics.Sample
}

func readGC() gcStats {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(s)
	return gcStats{samples: s}
}

// since returns the cycles run since before and an upper bound of the
// longest pause among them (the top of the highest histogram bucket that
// grew).
func (after gcStats) since(before gcStats) (cycles uint64, maxPause time.Duration) {
	if after.samples[0].Value.Kind() == metrics.KindUint64 && before.samples[0].Value.Kind() == metrics.KindUint64 {
		cycles = after.samples[0].Value.Uint64() - before.samples[0].Value.Uint64()
	}
	if after.samples[1].Value.Kind() != metrics.KindFloat64Histogram || before.samples[1].Value.Kind() != metrics.KindFloat64Histogram {
		return cycles, 0
	}
	a, b := after.samples[1].Value.Float64Histogram(), before.samples[1].Value.Float64Histogram()
	for i := len(a.Counts) - 1; i >= 0; i-- {
		if i < len(b.Counts) && a.Counts[i] > b.Counts[i] {
			top := a.Buckets[i+1]
			if top > 10 { // the last bucket is open: say its lower bound
				top = a.Buckets[i]
			}
			return cycles, time.Duration(top * float64(time.Second))
		}
	}
	return cycles, 0
}
