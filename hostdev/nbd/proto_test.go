package nbd

import (
	"bytes"
	"errors"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	// A write of 4 KiB at 1 MiB with FUA, as the kernel sends it: the
	// command flags in the upper half of the 32-bit type field.
	wire := []byte{
		0x25, 0x60, 0x95, 0x13, // magic
		0x00, 0x01, // flags: FUA
		0x00, 0x01, // type: write
		0, 0, 0, 0, 0, 0, 0x12, 0x34, // handle
		0, 0, 0, 0, 0, 0x10, 0, 0, // offset 1 MiB
		0, 0, 0x10, 0, // length 4 KiB
	}
	r, err := ParseRequest(wire)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Flags: CmdFlagFUA, Type: CmdWrite, Handle: 0x1234, Offset: 1 << 20, Length: 4096}
	if r != want {
		t.Fatalf("parsed %+v, want %+v", r, want)
	}
	if !r.HasPayload() {
		t.Fatal("a write has a payload")
	}
	var b [RequestLen]byte
	if got := want.Encode(b[:]); !bytes.Equal(got, wire) {
		t.Fatalf("encoded % x, want % x", got, wire)
	}
}

func TestRequestErrors(t *testing.T) {
	var b [RequestLen]byte
	Request{Type: CmdRead}.Encode(b[:])
	if _, err := ParseRequest(b[:RequestLen-1]); !errors.Is(err, ErrShort) {
		t.Fatalf("short header: %v", err)
	}
	b[0] ^= 1
	if _, err := ParseRequest(b[:]); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	wire := []byte{0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28, 1, 2, 3, 4, 5, 6, 7, 8}
	var b [SimpleReplyLen]byte
	r := Reply{Error: ENOSPC, Handle: 0x0102030405060708}
	if got := r.Encode(b[:]); !bytes.Equal(got, wire) {
		t.Fatalf("encoded % x, want % x", got, wire)
	}
	got, err := ParseReply(wire)
	if err != nil || got != r {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	if _, err := ParseReply(wire[:15]); !errors.Is(err, ErrShort) {
		t.Fatalf("short reply: %v", err)
	}
	wire[3] = 0
	if _, err := ParseReply(wire); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
}

func TestCmdName(t *testing.T) {
	for typ, want := range map[uint16]string{CmdRead: "READ", CmdTrim: "TRIM", CmdWriteZeroes: "WRITE_ZEROES", 99: "command 99"} {
		if got := CmdName(typ); got != want {
			t.Errorf("CmdName(%d) = %q, want %q", typ, got, want)
		}
	}
}
