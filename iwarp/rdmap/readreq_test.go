package rdmap

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

func TestReadRequestLayout(t *testing.T) {
	// Figure 6, field by field.
	want, _ := hex.DecodeString("11223344" + "0102030405060708" + "0000ffff" + "55667788" + "a1a2a3a4a5a6a7a8")
	f := ReadRequestFields{SinkSTag: 0x11223344, SinkTO: 0x0102030405060708, Size: 0xffff, SrcSTag: 0x55667788, SrcTO: 0xa1a2a3a4a5a6a7a8}
	b := bytes.Repeat([]byte{0xee}, ReadRequestLen+2)
	n, err := f.Encode(b)
	if err != nil || n != ReadRequestLen {
		t.Fatalf("Encode = %d, %v", n, err)
	}
	if !bytes.Equal(b[:n], want) || b[n] != 0xee {
		t.Errorf("Encode = % x, want % x", b, want)
	}
	r, err := ParseReadRequest(b[:n])
	if err != nil {
		t.Fatal(err)
	}
	if r.SinkSTag() != f.SinkSTag || r.SinkTO() != f.SinkTO || r.Size() != f.Size || r.SrcSTag() != f.SrcSTag || r.SrcTO() != f.SrcTO {
		t.Errorf("accessors %+v, want %+v", r.Fields(), f)
	}
}

func TestReadRequestRoundTrip(t *testing.T) {
	tests := []ReadRequestFields{
		{},
		{SinkSTag: 1, SinkTO: 2, Size: 3, SrcSTag: 4, SrcTO: 5},
		{SinkSTag: math.MaxUint32, SinkTO: math.MaxUint64, Size: math.MaxUint32, SrcSTag: math.MaxUint32, SrcTO: math.MaxUint64},
	}
	for _, f := range tests {
		var b [ReadRequestLen]byte
		if _, err := f.Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		r, err := ParseReadRequest(b[:])
		if err != nil || r.Fields() != f {
			t.Errorf("round trip %+v -> %+v, %v", f, r.Fields(), err)
		}
	}
}

func TestParseReadRequest(t *testing.T) {
	for _, n := range []int{0, 1, 27, 29, 46} {
		if r, err := ParseReadRequest(make([]byte, n)); err != ErrReadRequestLen || r != nil {
			t.Errorf("%d octets: %v, %v", n, r, err)
		}
	}
	b := make([]byte, 40)
	r, err := ParseReadRequest(b[:ReadRequestLen])
	if err != nil || cap(r) != ReadRequestLen || &r[0] != &b[0] {
		t.Errorf("28 octets: not a capped view: %v", err)
	}
	if _, err := (ReadRequestFields{}).Encode(make([]byte, 27)); err != ErrShortBuffer {
		t.Errorf("Encode into 27 octets: %v", err)
	}
}

// readRequest returns the DDP segment of an RDMA Read Request (Figure 12)
// with the given Read Request fields.
func readRequest(f ReadRequestFields) []byte {
	b := make([]byte, ddp.UntaggedHeaderLen+ReadRequestLen)
	uf, _ := UntaggedFields(OpReadRequest, 1, 0)
	uf.Last = true
	if _, err := uf.Encode(b); err != nil {
		panic(err)
	}
	if _, err := f.Encode(b[ddp.UntaggedHeaderLen:]); err != nil {
		panic(err)
	}
	return b
}

func TestValidateReadRequest(t *testing.T) {
	src := SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Base: 0x1000, Len: 0x1000}
	top := SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Base: math.MaxUint64 - 15, Len: 16}
	rr := func(size uint32, to uint64) ReadRequest {
		return ReadRequest(readRequest(ReadRequestFields{SinkSTag: 9, SinkTO: 0, Size: size, SrcSTag: 7, SrcTO: to})[ddp.UntaggedHeaderLen:])
	}
	tests := []struct {
		name string
		r    ReadRequest
		src  SourceBuffer
		err  error
	}{
		{"whole buffer", rr(0x1000, 0x1000), src, nil},
		{"last octet", rr(1, 0x1fff), src, nil},
		// 5.2.1: a zero-length Read Request is not validated.
		{"zero length", rr(0, math.MaxUint64), SourceBuffer{}, nil},
		{"invalid STag", rr(1, 0x1000), SourceBuffer{Associated: true, RemoteRead: true, Base: 0x1000, Len: 1}, ErrInvalidSTag},
		{"not associated", rr(1, 0x1000), SourceBuffer{Valid: true, RemoteRead: true, Base: 0x1000, Len: 1}, ErrSTagNotAssociated},
		{"no remote read", rr(1, 0x1000), SourceBuffer{Valid: true, Associated: true, Base: 0x1000, Len: 1}, ErrAccessRights},
		{"registry past 2^64", rr(1, math.MaxUint64),
			SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Base: math.MaxUint64, Len: 2}, ErrLocalCatastrophic},
		{"below base", rr(1, 0xfff), src, ErrBaseBounds},
		{"at end", rr(1, 0x2000), src, ErrBaseBounds},
		{"too long", rr(0x1001, 0x1000), src, ErrBaseBounds},
		{"max size", rr(math.MaxUint32, 0x1000), src, ErrBaseBounds},
		{"wrap", rr(2, math.MaxUint64), top, ErrTOWrap},
		{"sum is 2^64", rr(16, math.MaxUint64-15), top, ErrTOWrap},
		{"sum below 2^64", rr(15, math.MaxUint64-15), top, nil},
		{"short header", rr(1, 0x1000)[:27], src, ErrReadRequestLen},
	}
	for _, tt := range tests {
		if err := ValidateReadRequest(tt.r, tt.src); err != tt.err {
			t.Errorf("%s: ValidateReadRequest = %v, want %v", tt.name, err, tt.err)
		}
	}
}

func TestValidateInvalidate(t *testing.T) {
	tests := []struct {
		t   InvalidateTarget
		err error
	}{
		{InvalidateTarget{Valid: true, Associated: true, Invalidatable: true}, nil},
		{InvalidateTarget{}, ErrInvalidSTag},
		{InvalidateTarget{Associated: true, Invalidatable: true}, ErrInvalidSTag},
		{InvalidateTarget{Valid: true, Invalidatable: true}, ErrProtectionCannotInvalidate},
		{InvalidateTarget{Valid: true}, ErrProtectionCannotInvalidate},
		{InvalidateTarget{Valid: true, Associated: true}, ErrOperationCannotInvalidate},
	}
	for _, tt := range tests {
		if err := ValidateInvalidate(tt.t); err != tt.err {
			t.Errorf("ValidateInvalidate(%+v) = %v, want %v", tt.t, err, tt.err)
		}
	}
}
