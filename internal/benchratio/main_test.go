package main

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkTCPLoopback/1MiB-2         	    6100	    362948 ns/op	2000.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkRDMAWrite/1MiB-2           	    3616	    588514 ns/op	1700.00 MB/s	    1459 B/op	       5 allocs/op
BenchmarkRDMAWrite/4KiB-2           	    3616	    588514 ns/op	 100.00 MB/s
BenchmarkRDMAWrite/1MiB-Markers-2   	    3616	    588514 ns/op	1600.00 MB/s	    900000 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkSendLatency-2              	  101677	     25644 ns/op
BenchmarkISER/seqread1MiB_qd8-2     	    7298	    430757 ns/op	1000.00 MB/s	      2321 IOPS
PASS`
	rs, err := parse(strings.NewReader(in))
	if err != nil || len(rs) != 5 {
		t.Fatalf("parsed %d results, err %v", len(rs), err)
	}
	out := table(rs)
	if !strings.Contains(out, "BenchmarkRDMAWrite") || !strings.Contains(out, "85.0%") {
		t.Fatalf("table:\n%s", out)
	}
	if !strings.Contains(out, "seqread1MiB_qd8") || !strings.Contains(out, "50.0%") {
		t.Fatalf("BenchmarkISER not compared by the size in its name:\n%s", out)
	}
	if !strings.Contains(out, "1MiB-Markers") || !strings.Contains(out, "80.0%") {
		t.Fatalf("a sub-benchmark named by size and variant was not compared:\n%s", out)
	}
	if strings.Contains(out, "4KiB") {
		t.Fatalf("a size with no TCP baseline was compared:\n%s", out)
	}
	if got := table(nil); !strings.Contains(got, "no benchmark") {
		t.Fatalf("empty table: %q", got)
	}
}

// Several runs of a benchmark (go test -count) become one row, the median.
func TestTableMedians(t *testing.T) {
	in := `BenchmarkTCPLoopback/1MiB-2   10 1 ns/op 900.00 MB/s
BenchmarkRDMAWrite/1MiB-2   10 1 ns/op 100.00 MB/s
BenchmarkTCPLoopback/1MiB-2   10 1 ns/op 1000.00 MB/s
BenchmarkRDMAWrite/1MiB-2   10 1 ns/op 900.00 MB/s
BenchmarkTCPLoopback/1MiB-2   10 1 ns/op 5000.00 MB/s
BenchmarkRDMAWrite/1MiB-2   10 1 ns/op 950.00 MB/s
BenchmarkRDMAWrite/1MiB-2   10 1 ns/op 990.00 MB/s`
	rs, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	out := table(rs)
	// TCP: median 1000 of three; RDMA Write: (900+950)/2 of four.
	if strings.Count(out, "BenchmarkRDMAWrite") != 1 || !strings.Contains(out, "925.0") || !strings.Contains(out, "92.5%") {
		t.Fatalf("table:\n%s", out)
	}
	if got := table(nil); !strings.Contains(got, "no benchmark") {
		t.Fatalf("empty table: %q", got)
	}
}

// BenchmarkMarkersCost's metrics come out per size, medians of the runs.
func TestMarkersCost(t *testing.T) {
	in := `BenchmarkMarkersCost/1MiB-2   6000   318000 ns/op   13.00 cost-%   17.00 cpu-cost-%   3000 markers-MB/s   3500 plain-MB/s   73 B/op   0 allocs/op
BenchmarkMarkersCost/1MiB-2   6000   318000 ns/op   -1.50 cost-%   15.00 cpu-cost-%   3100 markers-MB/s   3400 plain-MB/s   73 B/op   0 allocs/op
BenchmarkMarkersCost/1MiB-2   6000   318000 ns/op   11.00 cost-%   16.00 cpu-cost-%   3200 markers-MB/s   3600 plain-MB/s   73 B/op   0 allocs/op
BenchmarkMarkersCost/4KiB-2   6000   318000 ns/op   20.00 cost-%   21.00 cpu-cost-%   1000 markers-MB/s   1250 plain-MB/s`
	out := markersCost(in)
	for _, want := range []string{"1MiB", "3500.0", "3100.0", "11.0%", "16.0%", "4KiB", "20.0%"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q:\n%s", want, out)
		}
	}
	if markersCost("BenchmarkRDMAWrite/1MiB-2 1 1 ns/op 1.00 MB/s") != "" {
		t.Fatal("a table without BenchmarkMarkersCost results")
	}
}
