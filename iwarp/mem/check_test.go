package mem

import (
	"math"
	"testing"
)

func TestCheck(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, 4*pageSize)
	pd, other := NewPD(), NewPD()
	zb := register(t, tab, pd, m, pageSize, 1000, LocalWrite|RemoteWrite, ZeroBased)
	va := register(t, tab, pd, m, 2*pageSize, 1000, RemoteRead, VABased)
	inv := register(t, tab, pd, m, 0, 10, RemoteRead, ZeroBased)
	dereg := register(t, tab, pd, m, 0, 10, RemoteRead, ZeroBased)
	if f := tab.Invalidate(inv.STag(), pd); f != FaultNone {
		t.Fatal(f)
	}
	deregister(t, tab, dereg)
	vbase := va.BaseTO()

	tests := []struct {
		name    string
		stag    STag
		pd      PD
		to, n   uint64
		need    Access
		want    Fault
		wantOff int // offset of the returned slice in the MR
	}{
		{"whole region", zb.STag(), pd, 0, 1000, RemoteWrite, FaultNone, 0},
		{"middle", zb.STag(), pd, 10, 20, RemoteWrite | LocalWrite, FaultNone, 10},
		{"local read needs no right", zb.STag(), pd, 999, 1, 0, FaultNone, 999},
		{"empty at the end", zb.STag(), pd, 1000, 0, RemoteWrite, FaultNone, 1000},
		{"empty past the end", zb.STag(), pd, 1001, 0, RemoteWrite, FaultBaseBounds, 0},
		{"one byte past the end", zb.STag(), pd, 999, 2, RemoteWrite, FaultBaseBounds, 0},
		{"far past the end", zb.STag(), pd, math.MaxUint64 - 10, 10, RemoteWrite, FaultBaseBounds, 0},
		{"TO wrap", zb.STag(), pd, math.MaxUint64, 1, RemoteWrite, FaultTOWrap, 0},
		{"TO wrap of a big length", zb.STag(), pd, 1, math.MaxUint64, RemoteWrite, FaultTOWrap, 0},
		{"VA-based whole region", va.STag(), pd, vbase, 1000, RemoteRead, FaultNone, 0},
		{"VA-based middle", va.STag(), pd, vbase + 500, 500, RemoteRead, FaultNone, 500},
		{"VA-based TO 0", va.STag(), pd, 0, 1, RemoteRead, FaultBaseBounds, 0},
		{"below the base", va.STag(), pd, vbase - 1, 1, RemoteRead, FaultBaseBounds, 0},
		{"empty below the base", va.STag(), pd, vbase - 1, 0, RemoteRead, FaultBaseBounds, 0},
		{"VA-based past the end", va.STag(), pd, vbase + 1, 1000, RemoteRead, FaultBaseBounds, 0},
		{"write to read-only", va.STag(), pd, vbase, 1, RemoteWrite, FaultAccess, 0},
		{"read from write-only", zb.STag(), pd, 0, 1, RemoteRead, FaultAccess, 0},
		{"access before wrap", zb.STag(), pd, math.MaxUint64, 1, RemoteRead, FaultAccess, 0},
		{"other PD", zb.STag(), other, 0, 1, RemoteWrite, FaultNotAssociated, 0},
		{"zero PD", zb.STag(), PD{}, 0, 1, RemoteWrite, FaultNotAssociated, 0},
		{"PD before access", zb.STag(), other, 0, 1, RemoteRead, FaultNotAssociated, 0},
		{"wrong key", zb.STag() ^ 1, pd, 0, 1, RemoteWrite, FaultInvalidSTag, 0},
		{"wrong key, other PD", zb.STag() ^ 0x80, other, 0, 1, RemoteWrite, FaultInvalidSTag, 0},
		{"unused index", MakeSTag(100, zb.STag().Key()), pd, 0, 1, 0, FaultInvalidSTag, 0},
		{"index without a chunk", MakeSTag(MaxIndex, 1), pd, 0, 1, 0, FaultInvalidSTag, 0},
		{"STag 0", 0, pd, 0, 1, 0, FaultInvalidSTag, 0},
		{"invalidated", inv.STag(), pd, 0, 1, RemoteRead, FaultInvalidSTag, 0},
		{"deregistered", dereg.STag(), pd, 0, 1, RemoteRead, FaultInvalidSTag, 0},
	}
	r := tab.NewReader()
	defer r.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.Enter()
			b, f := r.Check(tt.stag, tt.pd, tt.to, tt.n, tt.need)
			r.Exit()
			if f != tt.want {
				t.Fatalf("Check: %v, want %v", f, tt.want)
			}
			if f != FaultNone {
				if b != nil {
					t.Errorf("Check failed with %v but returned %d bytes", f, len(b))
				}
				return
			}
			mr := zb
			if tt.stag == va.STag() {
				mr = va
			}
			if uint64(len(b)) != tt.n || uint64(cap(b)) != tt.n {
				t.Errorf("len %d cap %d, want %d", len(b), cap(b), tt.n)
			}
			if tt.n > 0 && uintptrOf(b) != uintptrOf(mr.Bytes()[tt.wantOff:]) {
				t.Errorf("slice at %#x, want offset %d of the MR (%#x)", uintptrOf(b), tt.wantOff, uintptrOf(mr.Bytes()[tt.wantOff:]))
			}
		})
	}
}

// CheckSTag runs the TO-independent checks only: what an engine that skips the
// TO of an empty message asks for.
func TestCheckSTag(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd, other := NewPD(), NewPD()
	mr := register(t, tab, pd, m, 0, 100, LocalWrite|RemoteWrite, VABased)
	tests := []struct {
		name string
		stag STag
		pd   PD
		need Access
		want Fault
	}{
		{"valid", mr.STag(), pd, RemoteWrite, FaultNone},
		{"wrong key", mr.STag() + 1, pd, RemoteWrite, FaultInvalidSTag},
		{"other PD", mr.STag(), other, RemoteWrite, FaultNotAssociated},
		{"access", mr.STag(), pd, RemoteRead, FaultAccess},
	}
	for _, tt := range tests {
		if f := tab.CheckSTag(tt.stag, tt.pd, tt.need); f != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, f, tt.want)
		}
	}
}

func TestCheckOutsideSection(t *testing.T) {
	tab := NewTable(0)
	r := tab.NewReader()
	defer r.Close()
	mustPanic(t, "Check outside Enter", func() { r.Check(1, PD{}, 0, 0, 0) })
	r.Enter()
	mustPanic(t, "nested Enter", r.Enter)
	if err := r.Close(); err == nil {
		t.Error("Close inside a critical section succeeded")
	}
	r.Exit()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	mustPanic(t, "Enter after Close", r.Enter)
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestCheckAllocs(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd := NewPD()
	mr := register(t, tab, pd, m, 0, pageSize, LocalWrite|RemoteWrite, VABased)
	r := tab.NewReader()
	defer r.Close()
	stag, base := mr.STag(), mr.BaseTO()
	allocs := testing.AllocsPerRun(1000, func() {
		r.Enter()
		b, f := r.Check(stag, pd, base+8, 64, RemoteWrite)
		if f != FaultNone || len(b) != 64 {
			t.Fatal(f)
		}
		_, f = r.Check(stag+1, pd, base, 64, RemoteWrite)
		if f != FaultInvalidSTag {
			t.Fatal(f)
		}
		r.Exit()
		if tab.CheckSTag(stag, pd, RemoteWrite) != FaultNone {
			t.Fatal("CheckSTag")
		}
	})
	if allocs != 0 {
		t.Errorf("Check allocates %v times per run", allocs)
	}
}

func BenchmarkCheck(b *testing.B) {
	tab := NewTable(0)
	m := anon(b, 1<<20)
	pd := NewPD()
	// A populated table: the looked-up STag is one of many.
	var mrs []*MR
	for i := range 10000 {
		mrs = append(mrs, register(b, tab, pd, m, i*64, 64, LocalWrite|RemoteWrite, VABased))
	}
	mr := mrs[len(mrs)/2]
	stag, base := mr.STag(), mr.BaseTO()
	r := tab.NewReader()
	defer r.Close()
	b.Run("segment", func(b *testing.B) { // one section per tagged segment
		b.ReportAllocs()
		for b.Loop() {
			r.Enter()
			buf, f := r.Check(stag, pd, base+16, 32, RemoteWrite)
			if f != FaultNone || len(buf) != 32 {
				b.Fatal(f)
			}
			r.Exit()
		}
	})
	b.Run("batched", func(b *testing.B) { // many segments in one section
		b.ReportAllocs()
		r.Enter()
		for b.Loop() {
			buf, f := r.Check(stag, pd, base+16, 32, RemoteWrite)
			if f != FaultNone || len(buf) != 32 {
				b.Fatal(f)
			}
		}
		r.Exit()
	})
	b.Run("parallel", func(b *testing.B) { // a reader per goroutine
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := tab.NewReader()
			defer r.Close()
			for pb.Next() {
				r.Enter()
				buf, f := r.Check(stag, pd, base+16, 32, RemoteWrite)
				if f != FaultNone || len(buf) != 32 {
					b.Fatal(f)
				}
				r.Exit()
			}
		})
	})
}
