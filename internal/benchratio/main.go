// Command benchratio reads `go test -bench` output and prints each
// throughput benchmark of the iwarp engine as a ratio to
// BenchmarkTCPLoopback of the same size from the same run: how close the
// software RNIC comes to the limit plain TCP sets on this machine. With
// -count above 1, each benchmark's MB/s is the median of its runs. Then it
// prints what Markers cost, from BenchmarkMarkersCost.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// line matches "BenchmarkName/size-N  iters  ns/op  MB/s ...".
var line = regexp.MustCompile(`^(Benchmark[^\s/]+)/(\S+?)(?:-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) MB/s`)

type result struct {
	bench, size string
	mbps        float64
}

func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, err
		}
		out = append(out, result{m[1], m[2], v})
	}
	return out, sc.Err()
}

// sizeOf is the transfer size a sub-benchmark name carries: "1MiB" in
// "1MiB", and in "seqread1MiB_qd8" (BenchmarkISER's names).
var sizeOf = regexp.MustCompile(`\d+(?:KiB|MiB|GiB|B)`)

// medians merges the runs of each benchmark into one result, the median of
// their MB/s (the mean of the middle two for an even count), in the order
// each benchmark first appears.
func medians(results []result) []result {
	runs := map[[2]string][]float64{}
	var order []result
	for _, r := range results {
		k := [2]string{r.bench, r.size}
		if _, ok := runs[k]; !ok {
			order = append(order, r)
		}
		runs[k] = append(runs[k], r.mbps)
	}
	for i, r := range order {
		v := runs[[2]string{r.bench, r.size}]
		sort.Float64s(v)
		order[i].mbps = (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	return order
}

// table renders the ratio table; benchmarks with no TCP baseline of their
// size are left out.
func table(results []result) string {
	results = medians(results)
	base := map[string]float64{}
	for _, r := range results {
		if r.bench == "BenchmarkTCPLoopback" {
			base[r.size] = r.mbps
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %-20s %12s %12s %8s\n", "benchmark", "size", "MB/s", "TCP MB/s", "ratio")
	rows := 0
	sort.SliceStable(results, func(i, j int) bool { return results[i].bench < results[j].bench })
	for _, r := range results {
		t, ok := base[sizeOf.FindString(r.size)]
		if !ok || r.bench == "BenchmarkTCPLoopback" || t == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-28s %-20s %12.1f %12.1f %7.1f%%\n", r.bench, r.size, r.mbps, t, 100*r.mbps/t)
		rows++
	}
	if rows == 0 {
		return "no benchmark to compare with BenchmarkTCPLoopback\n"
	}
	return b.String()
}

// markersLine matches a BenchmarkMarkersCost result; its metrics follow.
var (
	markersLine = regexp.MustCompile(`^BenchmarkMarkersCost/(\S+?)(?:-\d+)?\s+\d+\s+[\d.]+ ns/op(.*)$`)
	metric      = regexp.MustCompile(`(-?[\d.]+) (cost-%|cpu-cost-%|plain-MB/s|markers-MB/s)`)
)

// markersCost renders BenchmarkMarkersCost's results: per size, the median
// over runs of each metric; "" when there are none.
func markersCost(text string) string {
	runs := map[string]map[string][]float64{}
	var sizes []string
	for _, l := range strings.Split(text, "\n") {
		m := markersLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		if runs[m[1]] == nil {
			runs[m[1]] = map[string][]float64{}
			sizes = append(sizes, m[1])
		}
		for _, mm := range metric.FindAllStringSubmatch(m[2], -1) {
			if v, err := strconv.ParseFloat(mm[1], 64); err == nil {
				runs[m[1]][mm[2]] = append(runs[m[1]][mm[2]], v)
			}
		}
	}
	if len(sizes) == 0 {
		return ""
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %14s %14s %10s %10s\n", "size", "plain MB/s", "Markers MB/s", "cost", "CPU cost")
	for _, sz := range sizes {
		r := runs[sz]
		fmt.Fprintf(&b, "%-8s %14.1f %14.1f %9.1f%% %9.1f%%\n", sz, med(r["plain-MB/s"]), med(r["markers-MB/s"]), med(r["cost-%"]), med(r["cpu-cost-%"]))
	}
	return b.String()
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	results, err := parse(strings.NewReader(string(in)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	fmt.Print(table(results))
	if m := markersCost(string(in)); m != "" {
		fmt.Println()
		fmt.Println("What Markers cost RDMA Write, CRC on (BenchmarkMarkersCost: the two connections take turns):")
		fmt.Print(m)
	}
}
