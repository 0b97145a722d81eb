package soak

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// sample is one look at a process: /proc/PID/status and /proc/PID/fd,
// and go_goroutines from its metrics endpoint (-1 where it has none).
type sample struct {
	At         time.Duration // since the soak started
	RSS        int64         // octets (VmRSS)
	Anon       int64         // octets (RssAnon + RssShmem): RSS without the mapped files of file LUNs
	VM         int64         // octets (VmSize): mappings, faulted in or not
	FDs        int
	Threads    int
	Goroutines int
	Heap       int64 // go_memstats_heap_inuse_bytes, -1 without metrics (shown, not judged)
}

// series is the samples of one process over its life: the long-lived
// initiator processes have one each, ddptarget one per incarnation
// (restarts reset it).
type series struct {
	Name       string // ddptarget#2, mount, bench-4k, ...
	Proc       string // ddptarget, mount, bench-4k, ...
	Start, End time.Duration
	Samples    []sample
}

// A bound says how far the last quarter of a process's life (after its
// warm-up) may rise above the first quarter: the last quarter's 25th
// percentile against the first quarter's 75th, so that neither a
// transient in the last (a client logging in, registered memory touched
// for a burst) nor a dip in the first (sessions gone for a reconnect, in
// a quarter of a few samples) decides; a leak raises every sample of the
// last quarter. The limit is first*Ratio + Slack.
type bound struct {
	Metric string
	Ratio  float64
	Slack  float64
	get    func(sample) float64
	unit   func(float64) string
}

// bounds are the soak's; docs/operations.md says why these numbers.
// Resident memory is judged without file pages ("anon"): VmRSS also counts
// the pages of the file LUNs the target has mapped, which grow toward the
// LUNs' size as I/O touches them (slowly, in a slow run) and are page
// cache, not the process's memory.
var bounds = []bound{
	{Metric: "anon", Ratio: 1.25, Slack: 32 << 20, get: func(s sample) float64 { return float64(s.Anon) }, unit: mib},
	{Metric: "vm", Ratio: 1.1, Slack: 256 << 20, get: func(s sample) float64 { return float64(s.VM) }, unit: mib},
	{Metric: "fds", Ratio: 1, Slack: 4, get: func(s sample) float64 { return float64(s.FDs) }, unit: count},
	{Metric: "goroutines", Ratio: 1.1, Slack: 12, get: func(s sample) float64 { return float64(s.Goroutines) }, unit: count},
}

func mib(v float64) string   { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
func count(v float64) string { return fmt.Sprintf("%.0f", v) }

// warmup is how much of the start of a process's life is not judged:
// logins, registered buffers faulted in, the first GC cycles.
func warmup(life time.Duration) time.Duration {
	return max(15*time.Second, life/10)
}

// minPerQuarter: a life shorter than this many samples per quarter after
// its warm-up is reported but not judged.
const minPerQuarter = 4

// verdict is what judge found for one series.
type verdict struct {
	Judged     bool
	Why        string   // why not judged
	Violations []string // bounds exceeded
	Lines      []string // first and last quarter per metric
}

// judge compares the last quarter of s after its warm-up with the first.
func judge(s *series) verdict {
	var v verdict
	from := s.Start + warmup(s.End-s.Start)
	var kept []sample
	for _, x := range s.Samples {
		if x.At >= from {
			kept = append(kept, x)
		}
	}
	q := len(kept) / 4
	if q < minPerQuarter {
		v.Why = fmt.Sprintf("%d samples after a %v warm-up, fewer than %d per quarter", len(kept), warmup(s.End-s.Start).Round(time.Second), minPerQuarter)
		return v
	}
	v.Judged = true
	first, last := kept[:q], kept[len(kept)-q:]
	for _, b := range bounds {
		if b.Metric == "goroutines" && first[0].Goroutines < 0 {
			continue // no metrics endpoint: threads are shown instead
		}
		m1, m4 := quantile(first, b.get, 0.75), quantile(last, b.get, 0.25)
		limit := m1*b.Ratio + b.Slack
		line := fmt.Sprintf("%s: first quarter p75 %s, last p25 %s (limit %s)", b.Metric, b.unit(m1), b.unit(m4), b.unit(limit))
		v.Lines = append(v.Lines, line)
		if m4 > limit {
			v.Violations = append(v.Violations, fmt.Sprintf("%s %s", s.Name, line))
		}
	}
	return v
}

// quantile is the q-quantile of a metric over xs, interpolated between
// the nearest ranks.
func quantile(xs []sample, get func(sample) float64, q float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = get(x)
	}
	sort.Float64s(vs)
	pos := q * float64(len(vs)-1)
	i := int(pos)
	if i+1 >= len(vs) {
		return vs[len(vs)-1]
	}
	return vs[i] + (pos-float64(i))*(vs[i+1]-vs[i])
}

// span is the minimum and maximum of a metric over samples, or "-".
func span(xs []sample, get func(sample) float64, unit func(float64) string) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := get(xs[0]), get(xs[0])
	for _, x := range xs[1:] {
		lo, hi = min(lo, get(x)), max(hi, get(x))
	}
	if lo < 0 {
		return "-"
	}
	return unit(lo) + " – " + unit(hi)
}

// TestJudge checks the bound logic without processes: a flat process
// passes, a transient does not fail it, a steady leak does, and a short
// life is not judged.
func TestJudge(t *testing.T) {
	mk := func(n int, f func(i int) sample) *series {
		s := &series{Name: "p", End: time.Duration(n) * time.Second}
		for i := 0; i < n; i++ {
			x := f(i)
			x.At = time.Duration(i) * time.Second
			s.Samples = append(s.Samples, x)
		}
		return s
	}
	flat := func(i int) sample {
		return sample{RSS: 100 << 20, Anon: 60 << 20, VM: 1 << 30, FDs: 20, Goroutines: 50}
	}
	if v := judge(mk(200, flat)); !v.Judged || len(v.Violations) != 0 {
		t.Errorf("flat: %+v", v)
	}
	spiky := func(i int) sample {
		x := flat(i)
		if i%5 == 0 { // a client present at one sample in five
			x.FDs += 30
			x.Goroutines += 200
			x.RSS += 200 << 20
			x.Anon += 200 << 20
			x.VM += 1 << 30
		}
		return x
	}
	if v := judge(mk(200, spiky)); len(v.Violations) != 0 {
		t.Errorf("transients: %v", v.Violations)
	}
	dip := func(i int) sample { // sessions gone for a reconnect, early on
		x := flat(i)
		if i >= 25 && i < 45 && i%3 == 0 {
			x.FDs -= 3
			x.Goroutines -= 15
		}
		return x
	}
	if v := judge(mk(200, dip)); len(v.Violations) != 0 {
		t.Errorf("dips in the first quarter: %v", v.Violations)
	}
	fdLeak := func(i int) sample { x := flat(i); x.FDs += i / 10; return x }
	if v := judge(mk(200, fdLeak)); len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "fds") {
		t.Errorf("one fd per 10 s: %v", v.Violations)
	}
	goLeak := func(i int) sample { x := flat(i); x.Goroutines += i / 4; return x }
	if v := judge(mk(200, goLeak)); len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "goroutines") {
		t.Errorf("one goroutine per 4 s: %v", v.Violations)
	}
	memLeak := func(i int) sample { x := flat(i); x.RSS += int64(i) << 20; x.Anon += int64(i) << 20; return x }
	fileWarm := func(i int) sample { x := flat(i); x.RSS += int64(i) << 20; return x } // LUN pages mapped
	if v := judge(mk(200, fileWarm)); len(v.Violations) != 0 {
		t.Errorf("file pages: %v", v.Violations)
	}
	if v := judge(mk(200, memLeak)); len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "anon") {
		t.Errorf("1 MiB per second: %v", v.Violations)
	}
	mapLeak := func(i int) sample { x := flat(i); x.VM += int64(i/10) * 64 << 20; return x }
	if v := judge(mk(200, mapLeak)); len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "vm") {
		t.Errorf("a 64 MiB mapping per 10 s: %v", v.Violations)
	}
	if v := judge(mk(20, flat)); v.Judged {
		t.Errorf("20 samples judged: %+v", v)
	}
	noGo := func(i int) sample { x := flat(i); x.Goroutines = -1; return x }
	if v := judge(mk(200, noGo)); len(v.Lines) != len(bounds)-1 {
		t.Errorf("without goroutines: %v", v.Lines)
	}
}
