package sctp

import (
	"errors"
	"testing"
)

// TestReorder checks reordering by DDP-SSN and the validity check of
// section 10.
func TestReorder(t *testing.T) {
	type push struct {
		ssn uint16
		err error
	}
	tests := []struct {
		name  string
		start uint16 // DDP-SSNs delivered before
		limit int
		push  []push
		out   []uint16
	}{
		{"in order", 0, 4, []push{{0, nil}, {1, nil}, {2, nil}}, []uint16{0, 1, 2}},
		{"reversed", 0, 4, []push{{2, nil}, {1, nil}, {0, nil}}, []uint16{0, 1, 2}},
		{"a gap stays until filled", 0, 4, []push{{1, nil}, {3, nil}}, nil},
		{"duplicate of one held", 0, 4, []push{{2, nil}, {2, ErrSSNInvalid}}, nil},
		{"duplicate of one delivered", 5, 4, []push{{4, ErrSSNInvalid}}, nil},
		{"32767 ahead is the edge of the window", 0, 4, []push{{32766, nil}, {32767, ErrSSNInvalid}}, nil},
		{"far behind", 100, 4, []push{{100 + 32768, ErrSSNInvalid}}, nil},
		{"wraps at 65535", 65534, 4, []push{{0, nil}, {65535, nil}, {65534, nil}}, []uint16{65534, 65535, 0}},
		{"no room to hold", 0, 2, []push{{3, nil}, {2, nil}, {1, ErrReorderFull}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReorder[uint16](tt.limit)
			r.next = tt.start
			for _, p := range tt.push {
				if err := r.Push(p.ssn, p.ssn); !errors.Is(err, p.err) {
					t.Fatalf("Push(%d): %v, want %v", p.ssn, err, p.err)
				}
			}
			var got []uint16
			for {
				v, ok := r.Pop()
				if !ok {
					break
				}
				got = append(got, v)
			}
			if len(got) != len(tt.out) {
				t.Fatalf("delivered %v, want %v", got, tt.out)
			}
			for i := range got {
				if got[i] != tt.out[i] {
					t.Fatalf("delivered %v, want %v", got, tt.out)
				}
			}
		})
	}
}

func TestReorderAllocs(t *testing.T) {
	r := NewReorder[[]byte](8)
	b := make([]byte, 8)
	ssn := uint16(0)
	if n := testing.AllocsPerRun(1000, func() {
		r.Push(ssn+1, b)
		r.Push(ssn, b)
		r.Pop()
		r.Pop()
		ssn += 2
	}); n != 0 {
		t.Fatalf("%v allocations per reordered pair", n)
	}
}

func TestWindow(t *testing.T) {
	var w Window
	w.Sent(3)
	if w.Total() != 3 || w.Room(0) != MaxInFlight || w.Room(MaxInFlight) != 0 || w.Room(MaxInFlight+5) != 0 {
		t.Fatalf("window: total %d room %d %d", w.Total(), w.Room(0), w.Room(MaxInFlight))
	}
}
