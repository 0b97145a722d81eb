package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

func valid() Options {
	return Options{RW: "randread", BlockSize: 4 * config.KiB, IODepth: 32, Runtime: time.Second, Progress: "auto"}
}

func TestOptionsCheck(t *testing.T) {
	if o := valid(); o.Check() != nil {
		t.Fatalf("the defaults fail: %v", o.Check())
	}
	for _, c := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.RW = "trim" }, `--rw "trim"`},
		{func(o *Options) { o.BlockSize = 256 }, "--bs 256"},
		{func(o *Options) { o.BlockSize = 1000 }, "--bs 1000"},
		{func(o *Options) { o.BlockSize = 32 * config.MiB }, "--bs 32MiB"},
		{func(o *Options) { o.IODepth = 0 }, "--iodepth 0"},
		{func(o *Options) { o.IODepth = 1025 }, "--iodepth 1025"},
		{func(o *Options) { o.Runtime = 0 }, "--runtime 0s"},
		{func(o *Options) { o.Progress = "sometimes" }, `--progress "sometimes"`},
	} {
		o := valid()
		c.edit(&o)
		if err := o.Check(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("want an error starting %q, got %v", c.want, err)
		}
	}
	for _, rw := range []string{"read", "write", "randread", "randwrite", "randrw"} {
		o := valid()
		o.RW = rw
		if err := o.Check(); err != nil {
			t.Errorf("%s: %v", rw, err)
		}
	}
}

func TestBuffers(t *testing.T) {
	o := valid()
	o.BlockSize, o.IODepth = 512, 3
	if got := o.Buffers(); got != 3*4096 {
		t.Errorf("512-octet I/Os at depth 3: %d octets, want a page each", got)
	}
	o.BlockSize = 8 * config.KiB
	if got := o.Buffers(); got != 3*8192 {
		t.Errorf("8 KiB I/Os at depth 3: %d octets", got)
	}
}

func TestStampCheck(t *testing.T) {
	buf := make([]byte, 4096)
	Stamp(buf, 100, 3)
	if msg := Check(buf, 100, 3); msg != "" {
		t.Fatalf("a fresh stamp fails: %s", msg)
	}
	for _, c := range []struct {
		name string
		lba  uint64
		gen  uint32
		edit func([]byte)
	}{
		{"other LBA", 101, 3, nil},
		{"older generation", 100, 2, nil},
		{"one bit flipped", 100, 3, func(b []byte) { b[2049] ^= 1 }},
		{"shifted by a block", 100, 3, func(b []byte) { copy(b, b[512:]) }},
	} {
		b := append([]byte(nil), buf...)
		if c.edit != nil {
			c.edit(b)
		}
		if msg := Check(b, c.lba, c.gen); !strings.Contains(msg, "LBA") {
			t.Errorf("%s: not detected", c.name)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500e3}, {0.99, 990e3}, {0.999, 999e3}} {
		got := h.Quantile(c.q)
		if got > c.want || got < c.want*0.93 { // lower bound of a ~6% bucket
			t.Errorf("q%.3f = %.0f ns, want about %.0f", c.q, got, c.want)
		}
	}
	if m := h.Mean(); m < 500e3 || m > 501e3 {
		t.Errorf("mean %.0f", m)
	}
	for v := int64(0); v < 1<<40; v = v*3 + 1 {
		if lo := lowerOf(bucketOf(v)); lo > float64(v) || lo < float64(v)*0.93-1 {
			t.Fatalf("value %d in a bucket starting at %.0f", v, lo)
		}
	}
}

func TestHistogramEmptyAndMerge(t *testing.T) {
	var a, b Histogram
	if a.Mean() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 {
		t.Fatalf("empty: mean %v, p50 %v, max %v", a.Mean(), a.Quantile(0.5), a.Max())
	}
	for range 90 {
		a.Add(10 * time.Microsecond)
	}
	for range 10 {
		b.Add(time.Millisecond)
	}
	b.Add(-time.Second) // a clock step: counted in the lowest bucket, not a panic
	a.Merge(&b)
	if a.Count() != 101 || a.Max() != int64(time.Millisecond) {
		t.Fatalf("merged: %d samples, max %d", a.Count(), a.Max())
	}
	if p50 := a.Quantile(0.5); p50 > 10e3 || p50 < 9.3e3 {
		t.Errorf("p50 %.0f ns, want about 10 us", p50)
	}
	if p99 := a.Quantile(0.99); p99 > 1e6 || p99 < 0.93e6 {
		t.Errorf("p99 %.0f ns, want about 1 ms", p99)
	}
	if q := a.Quantile(1); q != float64(a.Max()) && (q > 1e6 || q < 0.93e6) {
		t.Errorf("q1 %.0f ns", q)
	}
}

func TestResultPrint(t *testing.T) {
	var h Histogram
	for range 4 {
		h.Add(100 * time.Microsecond)
	}
	o := valid()
	r := summarize(o, 4096, 2*time.Second, 4, 4*4096, &h)
	var b bytes.Buffer
	r.Print(&b)
	want := "randread bs=4096 iodepth=32: 4 I/Os in 2.0 s\n" +
		"  IOPS 2  bandwidth 0.0 MB/s\n" +
		"  latency (us): mean 100.0  p50 98.3  p99 98.3  p99.9 98.3  max 100.0\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	r.Verified, r.VerifyErrors, r.FirstError = true, 1, "LBA 8 generation 2: ..."
	b.Reset()
	r.Print(&b)
	if !strings.HasSuffix(b.String(), "  verify: 1 errors\n  first: LBA 8 generation 2: ...\n") {
		t.Errorf("verified run:\n%s", b.String())
	}
}

// TestRun drives a memory LUN in each mode with Verify and checks the
// summary, and that options the LUN cannot take are usage errors.
func TestRun(t *testing.T) {
	testtarget.CheckLeaks(t)
	tt := testtarget.Start(t, testtarget.Memory(t, 1<<20))
	s := tt.Dial(t, initiator.Config{Buffers: 4 << 20, QueueDepth: 8})
	ctx := context.Background()
	for _, rw := range []string{"write", "randrw", "read", "randread"} {
		o := Options{RW: rw, BlockSize: 4 * config.KiB, IODepth: 4, Runtime: 100 * time.Millisecond, Size: 256 * config.KiB, Verify: true, Progress: "never"}
		run, err := New(ctx, s, o)
		if err != nil {
			t.Fatalf("%s: %v", rw, err)
		}
		r, err := run.Run(ctx, nil)
		if err != nil {
			t.Fatalf("%s: %v", rw, err)
		}
		if r.IOs == 0 || r.VerifyErrors != 0 || !r.Verified || r.LatP50Us <= 0 || r.LatMaxUs < r.LatP50Us {
			t.Errorf("%s: %+v", rw, r)
		}
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{RW: "read", BlockSize: 4 * config.KiB, IODepth: 1, Size: 2 * config.MiB}, "--size 2MiB is larger than LUN 0 (1.0 MiB)"},
		{Options{RW: "read", BlockSize: 8 * config.KiB, IODepth: 1, Size: 4 * config.KiB}, "--bs 8KiB must be a multiple of the LUN's 512-octet blocks and fit in 4.0 KiB"},
		{Options{RW: "read", BlockSize: 4 * config.KiB, IODepth: 8, Size: 16 * config.KiB, Verify: true}, "--verify needs at least --iodepth blocks"},
	} {
		_, err := New(ctx, s, c.o)
		if !IsUsage(err) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("want a usage error %q, got %v", c.want, err)
		}
	}
	if _, err := New(ctx, s, Options{LUN: 5, RW: "read", BlockSize: 4 * config.KiB, IODepth: 1}); err == nil || IsUsage(err) || !strings.HasPrefix(err.Error(), "LUN 5: ") {
		t.Errorf("a LUN the target lacks: %v", err)
	}
}
