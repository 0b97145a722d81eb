package sctp

import (
	"bytes"
	"testing"
)

// FuzzParseControl checks that ParseControl never panics, accepts only what
// section 5.2.3 allows, and that what it accepts re-encodes to the same
// octets. Seeds: testdata/fuzz/FuzzParseControl.
func FuzzParseControl(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseControl(b)
		if err != nil {
			if c != nil {
				t.Fatal("a message alongside an error")
			}
			return
		}
		if f := c.Function(); f < FuncInitiate || f > FuncTerminate {
			t.Fatalf("accepted function %v", f)
		}
		if len(c.PrivateData()) > MaxPrivateData || c.Function() == FuncTerminate && len(c.PrivateData()) > 0 {
			t.Fatalf("accepted %d octets of Private Data on %v", len(c.PrivateData()), c.Function())
		}
		again, err := AppendControl(nil, c.SSN(), c.Function(), c.PrivateData())
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x (%v), want %x", again, err, b)
		}
	})
}

// FuzzParseSegmentChunk checks the DDP-SSN split of a DDP Segment Chunk.
// Seeds: testdata/fuzz/FuzzParseSegmentChunk.
func FuzzParseSegmentChunk(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseSegmentChunk(b)
		if (err != nil) != (len(b) < SSNLen) {
			t.Fatalf("%d octets: %v", len(b), err)
		}
		if err == nil && (int(c.SSN()) != int(b[0])<<8|int(b[1]) || len(c.Segment()) != len(b)-2) {
			t.Fatalf("SSN %d segment %d octets", c.SSN(), len(c.Segment()))
		}
	})
}

// FuzzCore feeds the session state machine any sequence of inputs: it never
// panics, never sends a second Terminate, and once closed sends nothing but
// a Terminate that was still owed. Seeds: testdata/fuzz/FuzzCore.
func FuzzCore(f *testing.F) {
	f.Fuzz(func(t *testing.T, role bool, ins []byte) {
		r := Active
		if role {
			r = Passive
		}
		c := NewCore(r)
		terms := 0
		for _, b := range ins {
			in := Input(b % uint8(CallSegment+1))
			closed := c.State() == StateClosed
			o := c.Step(in)
			if o.Send == FuncTerminate {
				terms++
			}
			if closed && o.Send != 0 && o.Send != FuncTerminate {
				t.Fatalf("closed session sends %v on %v", o.Send, in)
			}
			if o.Event == EvIllegal && c.State() != StateClosed {
				t.Fatal("illegal sequence left the session open")
			}
		}
		if terms > 1 {
			t.Fatalf("%d Terminates sent", terms)
		}
	})
}

// FuzzReorder pushes any DDP-SSNs: whatever is delivered comes out in
// DDP-SSN order from 0 without gaps or repeats.
// Seeds: testdata/fuzz/FuzzReorder.
func FuzzReorder(f *testing.F) {
	f.Fuzz(func(t *testing.T, ssns []byte) {
		r := NewReorder[uint16](16)
		want := uint16(0)
		for i := 0; i+1 < len(ssns); i += 2 {
			ssn := uint16(ssns[i])<<8 | uint16(ssns[i+1])
			if err := r.Push(ssn, ssn); err != nil {
				continue
			}
			for {
				v, ok := r.Pop()
				if !ok {
					break
				}
				if v != want {
					t.Fatalf("delivered %d, want %d", v, want)
				}
				want++
			}
		}
	})
}
