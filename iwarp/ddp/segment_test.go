package ddp

import (
	"math"
	"testing"
)

// collect runs s to the end, checking the invariants every segmentation
// must keep, and returns the segments (or only the first and last few of a
// long run) and their count.
func collect(t *testing.T, s Segmenter, msgLen uint32, mulpdu, hdrLen int) (head, tail []Segment, count int) {
	t.Helper()
	var next uint64
	for {
		seg, ok := s.Next()
		if !ok {
			break
		}
		count++
		if uint64(seg.Offset) != next {
			t.Fatalf("segment %d at offset %d, want %d", count, seg.Offset, next)
		}
		if hdrLen+int(seg.Len) > mulpdu {
			t.Fatalf("segment %d: header %d + payload %d > MULPDU %d", count, hdrLen, seg.Len, mulpdu)
		}
		if seg.Len == 0 && msgLen != 0 {
			t.Fatalf("segment %d is empty in a %d-octet message", count, msgLen)
		}
		next += uint64(seg.Len)
		if seg.Last != (next == uint64(msgLen)) {
			t.Fatalf("segment %d: Last=%v at end %d of %d", count, seg.Last, next, msgLen)
		}
		if len(head) < 3 {
			head = append(head, seg)
		}
		tail = append(tail, seg)
		if len(tail) > 3 {
			tail = tail[1:]
		}
	}
	if next != uint64(msgLen) {
		t.Fatalf("segments cover %d octets of %d", next, msgLen)
	}
	if count != s.Count() {
		t.Fatalf("Count() = %d, Next yielded %d", s.Count(), count)
	}
	if _, ok := s.Next(); ok {
		t.Fatal("Next after the last segment returned a segment")
	}
	return head, tail, count
}

func TestSegmenter(t *testing.T) {
	tests := []struct {
		name       string
		msgLen     uint32
		mulpdu     int
		hdrLen     int
		count      int
		head, tail []Segment // expected first and last (up to three) segments
	}{
		// The two examples of 5.2.
		{"rfc untagged 2048/1500", 2048, 1500, UntaggedHeaderLen, 2,
			[]Segment{{0, 1482, false}, {1482, 566, true}}, nil},
		{"rfc tagged 2048/1500", 2048, 1500, TaggedHeaderLen, 2,
			[]Segment{{0, 1486, false}, {1486, 562, true}}, nil},
		// A zero-length message is one segment with L set.
		{"zero tagged", 0, 1500, TaggedHeaderLen, 1, []Segment{{0, 0, true}}, nil},
		{"zero untagged", 0, 19, UntaggedHeaderLen, 1, []Segment{{0, 0, true}}, nil},
		{"one octet", 1, 1500, UntaggedHeaderLen, 1, []Segment{{0, 1, true}}, nil},
		{"one octet min MULPDU", 1, 15, TaggedHeaderLen, 1, []Segment{{0, 1, true}}, nil},
		// MULPDU boundaries.
		{"exact fit tagged", 1486, 1500, TaggedHeaderLen, 1, []Segment{{0, 1486, true}}, nil},
		{"exact fit +1 tagged", 1487, 1500, TaggedHeaderLen, 2,
			[]Segment{{0, 1486, false}, {1486, 1, true}}, nil},
		{"exact fit -1 tagged", 1485, 1500, TaggedHeaderLen, 1, []Segment{{0, 1485, true}}, nil},
		{"exact fit untagged", 1482, 1500, UntaggedHeaderLen, 1, []Segment{{0, 1482, true}}, nil},
		{"exact fit +1 untagged", 1483, 1500, UntaggedHeaderLen, 2,
			[]Segment{{0, 1482, false}, {1482, 1, true}}, nil},
		{"two exact", 2 * 1482, 1500, UntaggedHeaderLen, 2,
			[]Segment{{0, 1482, false}, {1482, 1482, true}}, nil},
		{"one octet per segment", 5, 19, UntaggedHeaderLen, 5,
			[]Segment{{0, 1, false}, {1, 1, false}, {2, 1, false}}, []Segment{{2, 1, false}, {3, 1, false}, {4, 1, true}}},
		// Huge messages and MULPDUs.
		{"max message, huge MULPDU", math.MaxUint32, math.MaxInt, TaggedHeaderLen, 1,
			[]Segment{{0, math.MaxUint32, true}}, nil},
		{"max message, MULPDU 2^32+14", math.MaxUint32, 1<<32 + 14, TaggedHeaderLen, 1,
			[]Segment{{0, math.MaxUint32, true}}, nil},
		{"max message, MULPDU 2^31", math.MaxUint32, 1<<31 + UntaggedHeaderLen, UntaggedHeaderLen, 2,
			[]Segment{{0, 1 << 31, false}, {1 << 31, 1<<31 - 1, true}}, nil},
		{"max message, MULPDU 65535", math.MaxUint32, 65535, TaggedHeaderLen, 65552,
			[]Segment{{0, 65521, false}, {65521, 65521, false}, {131042, 65521, false}},
			[]Segment{{65549 * 65521, 65521, false}, {65550 * 65521, 65521, false}, {65551 * 65521, 224, true}}},
		{"small message, huge MULPDU", 100, 1 << 40, UntaggedHeaderLen, 1, []Segment{{0, 100, true}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSegmenter(tt.msgLen, tt.mulpdu, tt.hdrLen)
			if err != nil {
				t.Fatal(err)
			}
			head, tail, count := collect(t, s, tt.msgLen, tt.mulpdu, tt.hdrLen)
			if count != tt.count {
				t.Errorf("%d segments, want %d", count, tt.count)
			}
			for i, want := range tt.head {
				if i >= len(head) || head[i] != want {
					t.Errorf("segment %d = %+v, want %+v", i, head, want)
				}
			}
			if tt.tail != nil {
				for i, want := range tt.tail {
					if i >= len(tail) || tail[i] != want {
						t.Errorf("tail segment %d = %+v, want %+v", i, tail, want)
					}
				}
			}
		})
	}
}

func TestSegmenterErrors(t *testing.T) {
	tests := []struct {
		msgLen         uint32
		mulpdu, hdrLen int
		err            error
	}{
		{100, 1500, 0, ErrHeaderLen},
		{100, 1500, 16, ErrHeaderLen},
		{100, 1500, -14, ErrHeaderLen},
		{100, 14, TaggedHeaderLen, ErrMULPDU},
		{0, 14, TaggedHeaderLen, ErrMULPDU},
		{100, 18, UntaggedHeaderLen, ErrMULPDU},
		{100, 17, UntaggedHeaderLen, ErrMULPDU},
		{100, 0, TaggedHeaderLen, ErrMULPDU},
		{100, -1, TaggedHeaderLen, ErrMULPDU},
		{100, math.MinInt, UntaggedHeaderLen, ErrMULPDU},
	}
	for _, tt := range tests {
		if _, err := NewSegmenter(tt.msgLen, tt.mulpdu, tt.hdrLen); err != tt.err {
			t.Errorf("NewSegmenter(%d, %d, %d) = %v, want %v", tt.msgLen, tt.mulpdu, tt.hdrLen, err, tt.err)
		}
	}
	var zero Segmenter
	if _, ok := zero.Next(); !ok {
		t.Error("the zero Segmenter should behave as a zero-length message")
	}
}

// TestSegmentHeaders drives a reused header through a message as an engine
// would: tagged segments advance TO from the initial TO, untagged segments
// advance MO from zero, and only the last has L set (5.2).
func TestSegmentHeaders(t *testing.T) {
	const msgLen, mulpdu = 5000, 1500
	tests := []struct {
		name   string
		tagged bool
		baseTO uint64
		want   []uint64 // TO or MO per segment
	}{
		{"tagged", true, 16384, []uint64{16384, 16384 + 1486, 16384 + 2*1486, 16384 + 3*1486}},
		{"tagged TO 0", true, 0, []uint64{0, 1486, 2972, 4458}},
		{"untagged", false, 0, []uint64{0, 1482, 2964, 4446}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf [UntaggedHeaderLen]byte
			var h Header
			if tt.tagged {
				n, _ := TaggedFields{RsvdULP: 0x40, STag: 0xabcd, TO: tt.baseTO}.Encode(buf[:])
				h = buf[:n]
			} else {
				n, _ := UntaggedFields{RsvdULP: 0x43, QN: 0, MSN: 9}.Encode(buf[:])
				h = buf[:n]
			}
			s, err := NewSegmenter(msgLen, mulpdu, len(h))
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for seg, ok := s.Next(); ok; seg, ok = s.Next() {
				h.SetLast(seg.Last)
				if tt.tagged {
					h.SetTO(tt.baseTO + uint64(seg.Offset))
				} else {
					h.SetMO(seg.Offset)
				}
				p, _, err := Parse(h)
				if err != nil {
					t.Fatal(err)
				}
				if p.Last() != seg.Last || p.Tagged() != tt.tagged {
					t.Errorf("segment at %d: L=%v T=%v", seg.Offset, p.Last(), p.Tagged())
				}
				if tt.tagged {
					got = append(got, p.TO())
					if p.STag() != 0xabcd {
						t.Errorf("STag changed to %#x", p.STag())
					}
				} else {
					got = append(got, uint64(p.MO()))
					if p.MSN() != 9 {
						t.Errorf("MSN changed to %d", p.MSN())
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("offsets %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("offsets %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}
