package bench

import (
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Result is a run's summary.
type Result struct {
	RW           string  `json:"rw"`
	BlockSize    int     `json:"bs"`
	IODepth      int     `json:"iodepth"`
	Seconds      float64 `json:"runtime_s"`
	IOs          int64   `json:"ios"`
	IOPS         float64 `json:"iops"`
	MBps         float64 `json:"mb_per_s"`
	LatMeanUs    float64 `json:"lat_mean_us"`
	LatP50Us     float64 `json:"lat_p50_us"`
	LatP99Us     float64 `json:"lat_p99_us"`
	LatP999Us    float64 `json:"lat_p99_9_us"`
	LatMaxUs     float64 `json:"lat_max_us"`
	Verified     bool    `json:"verified"`
	VerifyErrors int64   `json:"verify_errors"`
	FirstError   string  `json:"first_error,omitempty"`
	// GCCycles and GCPauseMaxUs are this process's garbage collections
	// during the run and an upper bound of their longest stop-the-world
	// pause; StallMaxUs (with Options.Stalls) is the longest a goroutine
	// of the process waited past its wake-up time. A latency maximum near
	// them was spent in the initiator's process, not at the target.
	GCCycles     uint64  `json:"gc_cycles"`
	GCPauseMaxUs float64 `json:"gc_pause_max_us"`
	StallMaxUs   float64 `json:"stall_max_us,omitempty"`
}

// summarize makes the Result of ios I/Os of nbytes in elapsed with the
// latencies in h.
func summarize(o Options, bs int, elapsed time.Duration, ios, nbytes int64, h *Histogram) *Result {
	return &Result{RW: o.RW, BlockSize: bs, IODepth: o.IODepth, Seconds: elapsed.Seconds(), IOs: ios,
		IOPS: float64(ios) / elapsed.Seconds(), MBps: float64(nbytes) / elapsed.Seconds() / 1e6,
		LatMeanUs: h.Mean() / 1e3, LatP50Us: h.Quantile(0.5) / 1e3, LatP99Us: h.Quantile(0.99) / 1e3,
		LatP999Us: h.Quantile(0.999) / 1e3, LatMaxUs: float64(h.Max()) / 1e3,
		Verified: o.Verify}
}

// Print writes the summary as text.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%s bs=%d iodepth=%d: %d I/Os in %.1f s\n", r.RW, r.BlockSize, r.IODepth, r.IOs, r.Seconds)
	fmt.Fprintf(w, "  IOPS %.0f  bandwidth %.1f MB/s\n", r.IOPS, r.MBps)
	fmt.Fprintf(w, "  latency (us): mean %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", r.LatMeanUs, r.LatP50Us, r.LatP99Us, r.LatP999Us, r.LatMaxUs)
	if r.GCCycles > 0 || r.StallMaxUs > 0 {
		fmt.Fprintf(w, "  this process: %d GC cycles", r.GCCycles)
		if r.GCCycles > 0 {
			fmt.Fprintf(w, ", longest GC pause under %.0f us", r.GCPauseMaxUs)
		}
		if r.StallMaxUs > 0 {
			fmt.Fprintf(w, ", longest scheduling stall %.0f us", r.StallMaxUs)
		}
		fmt.Fprintln(w)
	}
	if r.Verified {
		fmt.Fprintf(w, "  verify: %d errors\n", r.VerifyErrors)
		if r.FirstError != "" {
			fmt.Fprintf(w, "  first: %s\n", r.FirstError)
		}
	}
}

// Histogram records latencies in log-linear buckets: 16 per power of two
// (about 6% resolution), no allocation per sample. The zero value is
// empty.
type Histogram struct {
	counts [64 * 16]int64
	n      int64
	sum    float64
	max    int64
}

func bucketOf(v int64) int {
	if v < 16 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 5 // v >> e is in [16, 32)
	return (e+1)*16 + int(v>>e) - 16
}

func lowerOf(i int) float64 {
	if i < 16 {
		return float64(i)
	}
	e := i/16 - 1
	return float64(int64(i%16+16) << e)
}

// Add records one latency.
func (h *Histogram) Add(d time.Duration) {
	v := int64(d)
	h.counts[min(bucketOf(v), len(h.counts)-1)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of samples.
func (h *Histogram) Count() int64 { return h.n }

// Max is the largest sample in nanoseconds.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the mean in nanoseconds, 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns, in nanoseconds, the lower bound of the bucket holding
// quantile q (0 when empty).
func (h *Histogram) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return lowerOf(i)
		}
	}
	return float64(h.max)
}
