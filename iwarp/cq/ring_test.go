package cq

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
)

// wc is a work completion the size of a verbs one; only id is looked at.
type wc struct {
	id uint64
	_  [4]uint32 // QP number, byte length, immediate data, invalidated STag
	_  [2]uint8  // status, opcode
}

func newRing[T any](t testing.TB, capacity int) *Ring[T] {
	t.Helper()
	r, err := New[T](capacity)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNew(t *testing.T) {
	tests := []struct{ capacity, want int }{
		{1, 2}, {2, 2}, {3, 4}, {4, 4}, {1000, 1024}, {1024, 1024}, {1025, 2048},
		{0, 0}, {-1, 0}, {MaxCapacity + 1, 0},
	}
	for _, tt := range tests {
		r, err := New[int](tt.capacity)
		if tt.want == 0 {
			if !errors.Is(err, ErrCapacity) {
				t.Errorf("New(%d): %v, want ErrCapacity", tt.capacity, err)
			}
			continue
		}
		if err != nil || r.Cap() != tt.want || r.Len() != 0 {
			t.Errorf("New(%d): cap %d, len %d, %v; want cap %d", tt.capacity, r.Cap(), r.Len(), err, tt.want)
		}
	}
}

func TestFIFO(t *testing.T) {
	r := newRing[wc](t, 16)
	for i := range 10 {
		if err := r.Push(wc{id: uint64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if r.Len() != 10 {
		t.Errorf("Len %d, want 10", r.Len())
	}
	for i := range 10 {
		v, ok := r.Poll()
		if !ok || v.id != uint64(i) {
			t.Fatalf("Poll %d: %v %v", i, v.id, ok)
		}
	}
	if v, ok := r.Poll(); ok {
		t.Fatalf("Poll of an empty ring: %v", v)
	}
}

func TestFull(t *testing.T) {
	r := newRing[int](t, 8)
	for i := range 8 {
		if err := r.Push(i, false); err != nil {
			t.Fatalf("Push %d: %v", i, err)
		}
	}
	if err := r.Push(8, false); !errors.Is(err, ErrOverrun) {
		t.Fatalf("Push to a full ring: %v, want ErrOverrun", err)
	}
	if r.Len() != 8 {
		t.Errorf("Len %d after an overrun, want 8", r.Len())
	}
	if v, _ := r.Poll(); v != 0 {
		t.Fatalf("Poll %d, want 0", v)
	}
	if err := r.Push(8, false); err != nil {
		t.Fatalf("Push after a Poll: %v", err)
	}
	for want := 1; want <= 8; want++ {
		if v, ok := r.Poll(); !ok || v != want {
			t.Fatalf("Poll %d %v, want %d: the overrun lost or reordered something", v, ok, want)
		}
	}
}

func TestWrapAround(t *testing.T) {
	r := newRing[uint64](t, 4)
	var next, want uint64
	for i := range 100000 {
		for range i%4 + 1 {
			if err := r.Push(next, false); err != nil {
				t.Fatal(err)
			}
			next++
		}
		for range i%4 + 1 {
			v, ok := r.Poll()
			if !ok || v != want {
				t.Fatalf("round %d: Poll %d %v, want %d", i, v, ok, want)
			}
			want++
		}
	}
}

// Positions are 64-bit and compared by difference, so they may wrap too.
func TestPositionWrap(t *testing.T) {
	r := newRing[uint64](t, 4)
	start := uint64(math.MaxUint64 - 9)
	r.enq.Store(start)
	r.deq.Store(start)
	for k := range uint64(4) {
		p := start + k
		r.slots[p&r.mask].seq.Store(p)
	}
	for i := range uint64(100) {
		for j := range uint64(3) {
			if err := r.Push(i*3+j, false); err != nil {
				t.Fatalf("Push at position %d: %v", r.enq.Load(), err)
			}
		}
		if err := r.Push(1, false); err != nil {
			t.Fatal(err)
		}
		if err := r.Push(2, false); !errors.Is(err, ErrOverrun) {
			t.Fatalf("Push to a full ring at position %d: %v", r.enq.Load(), err)
		}
		for j := range uint64(3) {
			if v, ok := r.Poll(); !ok || v != i*3+j {
				t.Fatalf("Poll at position %d: %d %v", r.deq.Load(), v, ok)
			}
		}
		if v, ok := r.Poll(); !ok || v != 1 {
			t.Fatal(v, ok)
		}
	}
}

// Poll drops the ring's reference to what it returns.
func TestPollClearsSlot(t *testing.T) {
	r := newRing[*int](t, 2)
	r.Push(new(int), false)
	r.Poll()
	for i := range r.slots {
		if r.slots[i].val != nil {
			t.Errorf("slot %d still points at a polled value", i)
		}
	}
}

type item struct{ producer, seq int }

// push pushes v, retrying while the ring is full.
func push[T any](t testing.TB, r *Ring[T], v T, solicited bool) {
	for {
		err := r.Push(v, solicited)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrOverrun) {
			t.Error(err)
			return
		}
		runtime.Gosched()
	}
}

// Each producer's completions come out in the order it pushed them, with
// one consumer or several (each sees a subsequence in order).
func TestMultiProducerOrder(t *testing.T) {
	const producers, n = 4, 20000
	for _, consumers := range []int{1, 3} {
		r := newRing[item](t, 64) // small: producers overrun and retry
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range n {
					push(t, r, item{p, i}, false)
				}
			})
		}
		seen := make([][]item, consumers)
		var total sync.WaitGroup
		var mu sync.Mutex
		count := 0
		for c := range consumers {
			total.Go(func() {
				for {
					mu.Lock()
					done := count == producers*n
					mu.Unlock()
					if done {
						return
					}
					if v, ok := r.Poll(); ok {
						seen[c] = append(seen[c], v)
						mu.Lock()
						count++
						mu.Unlock()
					} else {
						runtime.Gosched()
					}
				}
			})
		}
		wg.Wait()
		total.Wait()
		got := make([]int, producers) // completions of each producer seen
		for c, vs := range seen {
			last := make([]int, producers)
			for i := range last {
				last[i] = -1
			}
			for _, v := range vs {
				if v.seq <= last[v.producer] {
					t.Fatalf("%d consumers: consumer %d saw producer %d's %d after %d", consumers, c, v.producer, v.seq, last[v.producer])
				}
				last[v.producer] = v.seq
				got[v.producer]++
			}
		}
		for p, g := range got {
			if g != n {
				t.Errorf("%d consumers: %d completions of producer %d, want %d", consumers, g, p, n)
			}
		}
	}
}

func TestPushPollAllocs(t *testing.T) {
	r := newRing[wc](t, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := r.Push(wc{id: 1}, false); err != nil {
			t.Fatal(err)
		}
		if err := r.Push(wc{id: 2}, true); err != nil {
			t.Fatal(err)
		}
		r.Poll()
		r.Poll()
		r.Poll() // empty
	})
	if allocs != 0 {
		t.Errorf("Push and Poll allocate %v times per run", allocs)
	}
	r.Arm(false) // an armed ring: the producer wakes the consumer
	allocs = testing.AllocsPerRun(1000, func() {
		r.Push(wc{id: 1}, false)
		<-r.Notify()
		r.Poll()
		r.Arm(false)
	})
	if allocs != 0 {
		t.Errorf("Push, Poll and Arm allocate %v times per run", allocs)
	}
}

func BenchmarkPushPoll(b *testing.B) {
	r := newRing[wc](b, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Push(wc{id: 1}, false); err != nil {
			b.Fatal(err)
		}
		if _, ok := r.Poll(); !ok {
			b.Fatal("empty")
		}
	}
}

// Two producers push b.N completions between them; one consumer polls them.
func BenchmarkPushPoll2Producers(b *testing.B) {
	r := newRing[wc](b, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range 2 {
		n := b.N / 2
		if p == 0 {
			n += b.N % 2
		}
		wg.Go(func() {
			for i := range n {
				for r.Push(wc{id: uint64(i)}, false) != nil {
					runtime.Gosched()
				}
			}
		})
	}
	for got := 0; got < b.N; {
		if _, ok := r.Poll(); ok {
			got++
		} else {
			runtime.Gosched()
		}
	}
	wg.Wait()
}
