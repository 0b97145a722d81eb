package main

import (
	"strings"
	"testing"
	"time"
)

func TestStampCheck(t *testing.T) {
	buf := make([]byte, 4096)
	stamp(buf, 100, 3)
	if msg := check(buf, 100, 3); msg != "" {
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
		if msg := check(b, c.lba, c.gen); !strings.Contains(msg, "LBA") {
			t.Errorf("%s: not detected", c.name)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500e3}, {0.99, 990e3}, {0.999, 999e3}} {
		got := h.quantile(c.q)
		if got > c.want || got < c.want*0.93 { // lower bound of a ~6% bucket
			t.Errorf("q%.3f = %.0f ns, want about %.0f", c.q, got, c.want)
		}
	}
	if m := h.mean(); m < 500e3 || m > 501e3 {
		t.Errorf("mean %.0f", m)
	}
	for v := int64(0); v < 1<<40; v = v*3 + 1 {
		if lo := lowerOf(bucketOf(v)); lo > float64(v) || lo < float64(v)*0.93-1 {
			t.Fatalf("value %d in a bucket starting at %.0f", v, lo)
		}
	}
}
