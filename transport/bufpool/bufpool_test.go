package bufpool

import (
	"math/rand"
	"testing"
)

func TestPool(t *testing.T) {
	p, err := New(64<<10, 4096)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.Get(10000) // 3 units
	if !ok || a != 0 {
		t.Fatalf("Get(10000) = %d, %v", a, ok)
	}
	b, ok := p.Get(4096)
	if !ok || b != 3*4096 {
		t.Fatalf("Get(4096) = %d, %v", b, ok)
	}
	if _, ok := p.Get(64 << 10); ok {
		t.Fatal("Get of the whole pool succeeded while parts are in use")
	}
	p.Put(a, 10000)
	p.Put(b, 4096)
	if p.Free() != 64<<10 {
		t.Fatalf("Free = %d after returning everything", p.Free())
	}
	if c, ok := p.Get(64 << 10); !ok || c != 0 {
		t.Fatalf("Get(all) = %d, %v", c, ok)
	}
	if _, err := New(100, 3); err == nil {
		t.Fatal("unit 3 accepted")
	}
}

// TestPoolNoOverlap allocates and frees at random and checks that no two
// live runs overlap and that everything comes back.
func TestPoolNoOverlap(t *testing.T) {
	const size, unit = 1 << 20, 4096
	p, _ := New(size, unit)
	owner := make([]int, size/unit)
	type run struct{ off, n int }
	var live []run
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		if len(live) > 0 && r.Intn(2) == 0 {
			j := r.Intn(len(live))
			x := live[j]
			for u := x.off / unit; u < (x.off+x.n+unit-1)/unit; u++ {
				owner[u] = 0
			}
			p.Put(x.off, x.n)
			live = append(live[:j], live[j+1:]...)
			continue
		}
		n := 1 + r.Intn(64<<10)
		off, ok := p.Get(n)
		if !ok {
			continue
		}
		for u := off / unit; u < (off+n+unit-1)/unit; u++ {
			if owner[u] != 0 {
				t.Fatalf("run at %d of %d overlaps a live run", off, n)
			}
			owner[u] = i + 1
		}
		live = append(live, run{off, n})
	}
	for _, x := range live {
		p.Put(x.off, x.n)
	}
	if p.Free() != size {
		t.Fatalf("Free = %d, want %d", p.Free(), size)
	}
}

// TestPoolNoFragmentation: a small buffer taken and given back before
// large ones does not leave the pool unable to hand out its last large run.
func TestPoolNoFragmentation(t *testing.T) {
	p, _ := New(8<<20, 4096)
	small, _ := p.Get(32)
	p.Put(small, 32)
	for i := 0; i < 8; i++ {
		if _, ok := p.Get(1 << 20); !ok {
			t.Fatalf("large run %d of 8 refused with %d octets free", i, p.Free())
		}
	}
}
