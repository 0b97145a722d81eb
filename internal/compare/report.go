package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type results struct {
	o        *options
	patterns []pattern
	systems  []string
	samples  map[[2]string][]sample // (pattern, system) -> one per run
	limits   []limit
	notes    []string
}

func newResults(ps []pattern, ss []*system) *results {
	r := &results{patterns: ps, samples: map[[2]string][]sample{}}
	for _, s := range ss {
		r.systems = append(r.systems, s.name)
	}
	return r
}

func (r *results) add(p, s string, smp sample) {
	k := [2]string{p, s}
	r.samples[k] = append(r.samples[k], smp)
}

// stat is a median with its range.
type stat struct{ med, lo, hi float64 }

func statOf(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{m, s[0], s[len(s)-1]}
}

func (s stat) fmt(unit float64, prec int) string {
	return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, s.med/unit, prec, s.lo/unit, prec, s.hi/unit)
}

func (r *results) field(p, s string, f func(sample) float64) []float64 {
	var v []float64
	for _, x := range r.samples[[2]string{p, s}] {
		v = append(v, f(x))
	}
	return v
}

// ratio is the per-run ratio a/b of IOPS, paired run by run.
func (r *results) ratio(p, a, b string) (stat, bool) {
	x, y := r.samples[[2]string{p, a}], r.samples[[2]string{p, b}]
	if len(x) == 0 || len(x) != len(y) {
		return stat{}, false
	}
	var v []float64
	for i := range x {
		if y[i].iops > 0 {
			v = append(v, x[i].iops/y[i].iops)
		}
	}
	return statOf(v), len(v) > 0
}

// goal is the speed issue's bar for ddpstore against its peer.
func goal(p pattern, mount bool) float64 {
	switch {
	case mount:
		return 1.1
	case p.bs == 4<<10 && p.qd == 1:
		return 1.5
	case p.bs == 4<<10:
		return 1.2
	case p.bs == 1<<20:
		return 1.0
	}
	return 0
}

func (r *results) write() error {
	var b strings.Builder
	o := r.o
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# ddpstore against nbdkit on %s\n\n", host)
	pin := "servers on CPU 0, clients (and FUSE daemons) on CPU 1"
	if !o.pin {
		pin = "not pinned"
	}
	fmt.Fprintf(&b, "%s, %d CPUs, %s; %d runs of %v per pattern and system, interleaved; a %d MiB image on tmpfs served by both. Medians [min-max].\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), pin, o.runs, o.runtime, o.size>>20)
	var bw, rate, p50, p99 []float64
	for _, l := range r.limits {
		bw, rate, p50, p99 = append(bw, l.tcpBps), append(rate, l.pingRate), append(p50, l.rttP50), append(p99, l.rttP99)
	}
	fmt.Fprintf(&b, "## Plain TCP on this machine, same run (the limits)\n\n")
	fmt.Fprintf(&b, "| limit | median [min-max] |\n|---|---|\n")
	fmt.Fprintf(&b, "| one TCP stream (iperf3), MB/s | %s |\n", statOf(bw).fmt(1e6, 0))
	fmt.Fprintf(&b, "| ping-pong %d/%d octets, round trips/s | %s |\n", pingLen, pongLen, statOf(rate).fmt(1, 0))
	fmt.Fprintf(&b, "| ping-pong round trip p50, µs | %s |\n", statOf(p50).fmt(1e-6, 1))
	fmt.Fprintf(&b, "| ping-pong round trip p99, µs | %s |\n\n", statOf(p99).fmt(1e-6, 1))

	fmt.Fprintf(&b, "## Ratios, ddpstore / peer (IOPS, paired run by run)\n\n")
	fmt.Fprintf(&b, "| pattern | in process: ddpinitiator bench / fio nbd | goal | through the mount: ddpstore / nbdfuse | goal |\n|---|---|---|---|---|\n")
	var chart []string
	for _, p := range r.patterns {
		in, okIn := r.ratio(p.name, "ddpstore", "nbdkit")
		mnt, okM := r.ratio(p.name, "ddpstore-mount", "nbdfuse")
		cell := func(s stat, ok bool, g float64) (string, string) {
			if !ok {
				return "-", "-"
			}
			gs := "-"
			if g > 0 {
				mark := "met"
				if s.med < g {
					mark = "not met"
				}
				gs = fmt.Sprintf("%.1fx (%s)", g, mark)
			}
			return s.fmt(1, 2), gs
		}
		a, ga := cell(in, okIn, goal(p, false))
		c, gc := cell(mnt, okM, goal(p, true))
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", p.name, a, ga, c, gc)
		chart = append(chart, fmt.Sprintf("%s %.3f %.3f", p.name, orZero(in, okIn), orZero(mnt, okM)))
	}
	fmt.Fprintf(&b, "\n## iSER against iSCSI over TCP, the same ddptarget and LU (IOPS, paired run by run)\n\n")
	fmt.Fprintf(&b, "| pattern | ddpstore (iSER) / ddpstore-iscsi-tcp | server CPU µs/IO, iSER / TCP | client CPU µs/IO, iSER / TCP |\n|---|---|---|---|\n")
	for _, p := range r.patterns {
		x, ok := r.ratio(p.name, "ddpstore", "ddpstore-iscsi-tcp")
		if !ok {
			continue
		}
		cpu := func(s string, server bool) string {
			return statOf(r.field(p.name, s, func(x sample) float64 {
				if server {
					return perIO(x.serverCPU, x.ios)
				}
				return perIO(x.clientCPU, x.ios)
			})).fmt(1e-6, 1)
		}
		fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s |\n", p.name, x.fmt(1, 2),
			cpu("ddpstore", true), cpu("ddpstore-iscsi-tcp", true), cpu("ddpstore", false), cpu("ddpstore-iscsi-tcp", false))
	}
	fmt.Fprintf(&b, "\n## The RBD LUN against the file LUN, the same ddptarget build (IOPS, paired run by run)\n\n")
	fmt.Fprintf(&b, "The image is on a single-node Ceph 16.2 with a memstore OSD on this machine, its daemons pinned with the targets; their CPU counts as the server's.\n\n")
	fmt.Fprintf(&b, "| pattern | ddpstore-rbd / ddpstore (file) | RBD IOPS | file IOPS | server CPU µs/IO, RBD / file |\n|---|---|---|---|---|\n")
	for _, p := range r.patterns {
		x, ok := r.ratio(p.name, "ddpstore-rbd", "ddpstore")
		if !ok {
			continue
		}
		iops := func(s string) string {
			return statOf(r.field(p.name, s, func(x sample) float64 { return x.iops })).fmt(1, 0)
		}
		cpu := func(s string) string {
			return statOf(r.field(p.name, s, func(x sample) float64 { return perIO(x.serverCPU, x.ios) })).fmt(1e-6, 1)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s / %s |\n", p.name, x.fmt(1, 2), iops("ddpstore-rbd"), iops("ddpstore"), cpu("ddpstore-rbd"), cpu("ddpstore"))
	}
	fmt.Fprintf(&b, "\n## Every system\n\n")
	fmt.Fprintf(&b, "| pattern | system | IOPS | MB/s | client CPU µs/IO | server CPU µs/IO |\n|---|---|---|---|---|---|\n")
	for _, p := range r.patterns {
		for _, s := range r.systems {
			if len(r.samples[[2]string{p.name, s}]) == 0 {
				continue
			}
			iops := statOf(r.field(p.name, s, func(x sample) float64 { return x.iops }))
			mbs := statOf(r.field(p.name, s, func(x sample) float64 { return x.bps }))
			ccpu := statOf(r.field(p.name, s, func(x sample) float64 { return perIO(x.clientCPU, x.ios) }))
			scpu := statOf(r.field(p.name, s, func(x sample) float64 { return perIO(x.serverCPU, x.ios) }))
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", p.name, s, iops.fmt(1, 0), mbs.fmt(1e6, 0), ccpu.fmt(1e-6, 1), scpu.fmt(1e-6, 1))
		}
	}
	fmt.Fprintf(&b, "\nClients: `fio --ioengine=nbd` against nbdkit, `ddpinitiator bench` against ddptarget, `fio --ioengine=libaio --direct=1` on the nbdfuse and `ddpinitiator mount` files. Client CPU counts fio or the bench, and the FUSE daemon for the mounts; the kernel's FUSE work is in fio's system time.\n")
	for _, n := range r.notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(b.String())
	if o.png != "" {
		if err := plot(o.png, chart); err != nil {
			fmt.Fprintf(os.Stderr, "compare: no chart: %v\n", err)
		}
	}
	return nil
}

func perIO(cpu, ios float64) float64 {
	if ios == 0 {
		return 0
	}
	return cpu / ios
}

func orZero(s stat, ok bool) float64 {
	if !ok {
		return 0
	}
	return s.med
}

// plot draws the ratios as grouped bars with gnuplot.
func plot(png string, rows []string) error {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		return fmt.Errorf("gnuplot is not installed")
	}
	dir, err := os.MkdirTemp("", "compare-plot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "ratios.dat")
	if err := os.WriteFile(data, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	script := fmt.Sprintf(`set terminal pngcairo size 900,420 noenhanced font ",10"
set output %q
set title "ddpstore / peer, IOPS (median of paired runs; 1.0 = as fast as the peer)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set grid ytics
set xtics rotate by -20
set key outside bottom center horizontal
plot %q using 2:xtic(1) title "in process (bench / fio nbd)", '' using 3 title "through the mount (/ nbdfuse)", 1 with lines lw 2 lc rgb "black" title "1.0"
`, png, data)
	if abs, err := filepath.Abs(png); err == nil {
		os.MkdirAll(filepath.Dir(abs), 0o755)
	}
	cmd := exec.Command("gnuplot")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %v: %s", err, out)
	}
	return nil
}
