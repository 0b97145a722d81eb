package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// report judges every series, prints the summary table, writes it to
// SOAK_OUT (default out/soak.md at the module's root), and fails the test
// with every failure found.
func (r *rig) report() {
	var b strings.Builder
	r.mu.Lock()
	defer r.mu.Unlock()
	elapsed := time.Since(r.start).Round(time.Second)
	fmt.Fprintf(&b, "# Soak, %v\n\n", r.dur)
	fmt.Fprintf(&b, "Run %s, %v in all; `make soak DURATION=%v` (integration/soak).\n\n", r.start.UTC().Format("2006-01-02 15:04 MST"), elapsed, r.dur)

	var benchIOs, benchVerify, benchLosses int64
	var benchLines []string
	for _, lb := range r.benches {
		name := lb.name
		losses := int64(len(grepFile(filepath.Join(r.dir, name+".log"), "connection lost")))
		benchLosses += losses
		if res := r.benchResult(name); res != nil {
			benchIOs += res.IOs
			benchVerify += res.VerifyErrors
			benchLines = append(benchLines, fmt.Sprintf("%s %d (%.0f IOPS, max latency %.1f s, %d connection losses)", name, res.IOs, res.IOPS, res.LatMaxUs/1e6, losses))
		} else {
			benchLines = append(benchLines, fmt.Sprintf("%s: no result", name))
		}
	}
	total := r.fioIOs.Load() + benchIOs + r.shortIOs.Load() + 2*r.canaryChecks.Load()
	verify := r.fioErrors.Load() + benchVerify + r.shortVerifyErrors.Load() + r.canaryMismatch.Load()
	fmt.Fprintf(&b, "| what | count |\n| --- | --- |\n")
	row := func(k, v string, a ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(v, a...)) }
	row("I/Os done", "%d", total)
	row("· fio through the mount (O_DIRECT, verify)", "%d in %d runs", r.fioIOs.Load(), r.fioRuns.Load())
	row("· long benches in process (--verify)", "%s", strings.Join(benchLines, "; "))
	row("· short-lived benches", "%d", r.shortIOs.Load())
	row("· canary (written, read back)", "%d writes, %d checks", r.canaryWrites.Load(), r.canaryChecks.Load())
	row("verify errors", "%d (fio runs failed %d, benches %d, short benches %d, canary %d)", verify, r.fioErrors.Load(), benchVerify, r.shortVerifyErrors.Load(), r.canaryMismatch.Load())
	row("connection cuts (ss -K)", "%d, %d sockets killed", r.cutCount.Load(), r.socketsKilled.Load())
	ms := r.mountStats
	row("reconnects", "mount %.0f of %.0f connection losses; long benches %d losses; short clients %d losses", ms["ddpinitiator_reconnects_total"], ms["ddpinitiator_connection_losses_total"], benchLosses, r.shortLosses.Load())
	if n := len(r.mountBack); n > 0 {
		d := append([]time.Duration(nil), r.mountBack...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		row("the mount back after a cut (metrics polled every 20 ms)", "median %v, max %v, of %d cuts", d[n/2].Round(time.Millisecond), d[n-1].Round(time.Millisecond), n)
	}
	row("target restarts", "%d (%d SIGTERM, longest shutdown %v; %d SIGKILL)", r.restarts.Load(), r.restarts.Load()-r.kills.Load(), time.Duration(r.longestStop.Load()).Round(time.Millisecond), r.kills.Load())
	var terms []string
	for k, v := range r.targetErrors {
		terms = append(terms, fmt.Sprintf("%s %.0f", k, v))
	}
	sort.Strings(terms)
	if len(terms) == 0 {
		terms = []string{"none"}
	}
	row("target's Terminates and Rejects", "%s", strings.Join(terms, "; "))
	row("client sessions that came and went", "%d short-lived (%d ok, %d killed mid-run, %d failed at a cut during login, %d failed otherwise), %d canary", r.shortSessions.Load(), r.shortOK.Load(), r.shortKilled.Load(), r.shortCutShort.Load(), r.shortFailed.Load(), r.canarySessions.Load())
	row("target sessions once only the mount was left", "%d sessions, %d connections (want 1 and 1)", r.endSessions, r.endConnections)

	fmt.Fprintf(&b, "\n| process | lives | samples | RSS | anon | VmSize | Go heap in use | fds | goroutines | threads | bounds |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var violations []string
	var details []string
	procs := []string{}
	byProc := map[string][]*series{}
	for _, name := range r.order {
		s := r.series[name]
		if byProc[s.Proc] == nil {
			procs = append(procs, s.Proc)
		}
		byProc[s.Proc] = append(byProc[s.Proc], s)
	}
	for _, p := range procs {
		var all []sample
		var verdicts []string
		for _, s := range byProc[p] {
			all = append(all, s.Samples...)
			v := judge(s)
			switch {
			case !v.Judged:
				verdicts = append(verdicts, s.Name+": not judged")
				details = append(details, fmt.Sprintf("- %s (%v–%v): not judged: %s", s.Name, s.Start.Round(time.Second), s.End.Round(time.Second), v.Why))
			case len(v.Violations) > 0:
				verdicts = append(verdicts, s.Name+": **exceeded**")
				violations = append(violations, v.Violations...)
			default:
				verdicts = append(verdicts, s.Name+": within")
			}
			if v.Judged {
				details = append(details, fmt.Sprintf("- %s (%v–%v): %s", s.Name, s.Start.Round(time.Second), s.End.Round(time.Second), strings.Join(v.Lines, "; ")))
			}
		}
		if len(byProc[p]) == 1 {
			verdicts[0] = verdicts[0][strings.Index(verdicts[0], ": ")+2:]
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", p, len(byProc[p]), len(all),
			span(all, func(s sample) float64 { return float64(s.RSS) }, mib),
			span(all, func(s sample) float64 { return float64(s.Anon) }, mib),
			span(all, func(s sample) float64 { return float64(s.VM) }, mib),
			span(all, func(s sample) float64 { return float64(s.Heap) }, mib),
			span(all, func(s sample) float64 { return float64(s.FDs) }, count),
			span(all, func(s sample) float64 { return float64(s.Goroutines) }, count),
			span(all, func(s sample) float64 { return float64(s.Threads) }, count),
			strings.Join(verdicts, ", "))
	}
	fmt.Fprintf(&b, "\nLast quarter against first quarter of each life after its warm-up:\n\n%s\n", strings.Join(details, "\n"))
	fmt.Fprintf(&b, "\nBounds: the last quarter's 25th percentile at most the first quarter's 75th")
	for _, bd := range bounds {
		fmt.Fprintf(&b, "; %s ×%.2f + %s", bd.Metric, bd.Ratio, bd.unit(bd.Slack))
	}
	fmt.Fprintf(&b, ". Warm-up: the first 10%% of a life, at least 15 s. Samples every %v. Goroutines from go_goroutines of the process's /metrics; the benches have none (threads shown).\n", sampleEvery(r.dur))

	failures := append(append([]string(nil), r.failures...), violations...)
	if len(failures) == 0 {
		fmt.Fprintf(&b, "\nResult: **pass**.\n")
	} else {
		fmt.Fprintf(&b, "\nResult: **FAIL**\n\n")
		for _, f := range failures {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(strings.TrimSpace(f), "\n", "\n  "))
		}
	}
	out := os.Getenv("SOAK_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "out", "soak.md")
	}
	os.MkdirAll(filepath.Dir(out), 0o755)
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		r.t.Errorf("writing %s: %v", out, err)
	}
	csv := strings.TrimSuffix(out, ".md") + "-samples.csv"
	if err := r.writeSamples(csv); err != nil {
		r.t.Errorf("writing %s: %v", csv, err)
	}
	fmt.Printf("\n%s\n(written to %s; every sample in %s)\n", b.String(), out, csv)
	for _, f := range failures {
		r.t.Error(f)
	}
}

// writeSamples writes every sample as CSV, one line per process and time.
func (r *rig) writeSamples(path string) error {
	var b strings.Builder
	b.WriteString("process,seconds,rss_bytes,anon_bytes,vm_bytes,heap_inuse_bytes,fds,goroutines,threads\n")
	for _, name := range r.order {
		for _, x := range r.series[name].Samples {
			fmt.Fprintf(&b, "%s,%.1f,%d,%d,%d,%d,%d,%d,%d\n", name, x.At.Seconds(), x.RSS, x.Anon, x.VM, x.Heap, x.FDs, x.Goroutines, x.Threads)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
