package rdmap

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// rfc5044Send is the DDP Segment of RFC 5044 section 4.4, Figure 5: DDP
// control 0x41 (T 0, L 1, DV 1), RDMAP control 0x43 (RV 1, Send), QN 0,
// MSN 1, MO 0, then 24 octets of Send data.
func rfc5044Send() []byte {
	b, err := hex.DecodeString("4143" + "00000000" + "00000000" + "00000001" + "00000000")
	if err != nil {
		panic(err)
	}
	return append(b, make([]byte, 24)...)
}

func TestRFC5044Example(t *testing.T) {
	seg := rfc5044Send()
	h, p, err := Parse(seg)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	c := ControlOf(h)
	if c.RV() != 1 || c.Opcode() != OpSend || uint8(c) != 0x43 || InvalidateSTag(h) != 0 || len(p) != 24 {
		t.Errorf("RV %d opcode %v control %#02x inv %#x payload %d", c.RV(), c.Opcode(), uint8(c), InvalidateSTag(h), len(p))
	}
	f, err := UntaggedFields(OpSend, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Last = true
	var b [ddp.UntaggedHeaderLen]byte
	if _, err := f.Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:], seg[:ddp.UntaggedHeaderLen]) {
		t.Errorf("encoded % x, want % x", b, seg[:ddp.UntaggedHeaderLen])
	}
}

func TestOpcode(t *testing.T) {
	tests := []struct {
		op                            Opcode
		name                          string
		valid, tagged, inv, se, hasQN bool
		qn                            uint32
	}{
		{OpWrite, "RDMA Write", true, true, false, false, false, 0},
		{OpReadRequest, "RDMA Read Request", true, false, false, false, true, QNReadRequest},
		{OpReadResponse, "RDMA Read Response", true, true, false, false, false, 0},
		{OpSend, "Send", true, false, false, false, true, QNSend},
		{OpSendInvalidate, "Send with Invalidate", true, false, true, false, true, QNSend},
		{OpSendSE, "Send with Solicited Event", true, false, false, true, true, QNSend},
		{OpSendSEInvalidate, "Send with Solicited Event and Invalidate", true, false, true, true, true, QNSend},
		{OpTerminate, "Terminate", true, false, false, false, true, QNTerminate},
		{0x8, "reserved opcode 0x8", false, false, false, false, false, 0},
		{0xa, "reserved opcode 0xa", false, false, false, false, false, 0},
		{0xf, "reserved opcode 0xf", false, false, false, false, false, 0},
	}
	for _, tt := range tests {
		op := tt.op
		qn, hasQN := op.QN()
		if op.String() != tt.name || op.Valid() != tt.valid || op.Tagged() != tt.tagged ||
			op.Invalidates() != tt.inv || op.SolicitedEvent() != tt.se || hasQN != tt.hasQN || qn != tt.qn {
			t.Errorf("%#x: %q valid=%v tagged=%v inv=%v se=%v qn=%d,%v", uint8(op), op.String(), op.Valid(),
				op.Tagged(), op.Invalidates(), op.SolicitedEvent(), qn, hasQN)
		}
	}
	if QNSend != 0 || QNReadRequest != 1 || QNTerminate != 2 {
		t.Error("queue numbers differ from Figure 4")
	}
}

func TestControl(t *testing.T) {
	for op := Opcode(0); op <= OpTerminate; op++ {
		c := MakeControl(op)
		if uint8(c) != 0x40|uint8(op) || c.RV() != Version || c.Opcode() != op {
			t.Errorf("MakeControl(%v) = %#02x", op, uint8(c))
		}
		if _, err := ParseControl(uint8(c)); err != nil {
			t.Errorf("ParseControl(%#02x) = %v", uint8(c), err)
		}
	}
	tests := []struct {
		b   uint8
		rv  uint8
		op  Opcode
		err error
	}{
		{0x43, 1, OpSend, nil},
		{0x73, 1, OpSend, nil}, // reserved bits ignored (4.1)
		{0x47, 1, OpTerminate, nil},
		{0x03, 0, OpSend, ErrInvalidVersion}, // RDMA Consortium version
		{0x83, 2, OpSend, ErrInvalidVersion},
		{0xc3, 3, OpSend, ErrInvalidVersion},
		{0x48, 1, 0x8, ErrUnexpectedOpcode},
		{0x4f, 1, 0xf, ErrUnexpectedOpcode},
		{0x08, 0, 0x8, ErrInvalidVersion}, // version before opcode
	}
	for _, tt := range tests {
		c, err := ParseControl(tt.b)
		if err != tt.err || c.RV() != tt.rv || c.Opcode() != tt.op {
			t.Errorf("ParseControl(%#02x) = RV %d %v, %v; want RV %d %v, %v", tt.b, c.RV(), c.Opcode(), err, tt.rv, tt.op, tt.err)
		}
	}
}

func TestFields(t *testing.T) {
	for op := Opcode(0); op < 16; op++ {
		tf, terr := TaggedFields(op, 0xabcd, 1<<40)
		uf, uerr := UntaggedFields(op, 7, 0xdeadbeef)
		switch {
		case op.Tagged():
			want := ddp.TaggedFields{RsvdULP: 0x40 | uint8(op), STag: 0xabcd, TO: 1 << 40}
			if terr != nil || tf != want || uerr != ErrWrongModel {
				t.Errorf("%v: tagged %+v, %v; untagged %v", op, tf, terr, uerr)
			}
		case op.Valid():
			qn, _ := op.QN()
			inv := uint32(0)
			if op.Invalidates() {
				inv = 0xdeadbeef
			}
			want := ddp.UntaggedFields{RsvdULP: 0x40 | uint8(op), RsvdULP32: inv, QN: qn, MSN: 7}
			if uerr != nil || uf != want || terr != ErrWrongModel {
				t.Errorf("%v: untagged %+v, %v; tagged %v", op, uf, uerr, terr)
			}
		default:
			if terr != ErrWrongModel || uerr != ErrWrongModel {
				t.Errorf("%v: %v, %v", op, terr, uerr)
			}
		}
	}
}

// header encodes a DDP header with the given DDP control octet, RDMAP
// control octet and QN (untagged) for the validation tables.
func header(ddpCtl, rdmapCtl uint8, qn uint32) ddp.Header {
	b := make([]byte, ddp.UntaggedHeaderLen)
	if ddp.Control(ddpCtl).Tagged() {
		b = b[:ddp.TaggedHeaderLen]
		if _, err := (ddp.TaggedFields{STag: 1}).Encode(b); err != nil {
			panic(err)
		}
	} else if _, err := (ddp.UntaggedFields{QN: qn, MSN: 1}).Encode(b); err != nil {
		panic(err)
	}
	b[0], b[1] = ddpCtl, rdmapCtl
	return b
}

func TestValidateHeader(t *testing.T) {
	tests := []struct {
		name string
		h    ddp.Header
		err  error
	}{
		{"write", header(0xc1, 0x40, 0), nil},
		{"read response", header(0x81, 0x42, 0), nil},
		{"read request", header(0x41, 0x41, 1), nil},
		{"send", header(0x41, 0x43, 0), nil},
		{"send with invalidate", header(0x41, 0x44, 0), nil},
		{"send with SE", header(0x01, 0x45, 0), nil},
		{"send with SE and invalidate", header(0x41, 0x46, 0), nil},
		{"terminate", header(0x41, 0x47, 2), nil},
		{"rfc5044", ddp.Header(rfc5044Send()[:18]), nil},
		{"reserved bits", header(0x41, 0x73, 0), nil},
		// 7.2 checks 2 and 3.
		{"RV 0", header(0x41, 0x03, 0), ErrInvalidVersion},
		{"RV 2 tagged", header(0x81, 0x80, 0), ErrInvalidVersion},
		{"RV 3", header(0x41, 0xc7, 2), ErrInvalidVersion},
		{"reserved opcode", header(0x41, 0x48, 0), ErrUnexpectedOpcode},
		{"reserved opcode tagged", header(0x81, 0x4f, 0), ErrUnexpectedOpcode},
		// Figure 4: buffer model of each opcode.
		{"untagged write", header(0x41, 0x40, 0), ErrUnexpectedOpcode},
		{"untagged read response", header(0x41, 0x42, 0), ErrUnexpectedOpcode},
		{"tagged send", header(0x81, 0x43, 0), ErrUnexpectedOpcode},
		{"tagged read request", header(0xc1, 0x41, 0), ErrUnexpectedOpcode},
		{"tagged terminate", header(0xc1, 0x47, 0), ErrUnexpectedOpcode},
		// Figure 4: queue of each untagged opcode.
		{"send on QN 1", header(0x41, 0x43, 1), ErrUnexpectedOpcode},
		{"send with invalidate on QN 2", header(0x41, 0x44, 2), ErrUnexpectedOpcode},
		{"read request on QN 0", header(0x41, 0x41, 0), ErrUnexpectedOpcode},
		{"terminate on QN 1", header(0x41, 0x47, 1), ErrUnexpectedOpcode},
		{"send on QN 3", header(0x41, 0x43, 3), ddp.ErrInvalidQN},
		{"terminate on QN 2^32-1", header(0x41, 0x47, 0xffffffff), ddp.ErrInvalidQN},
		// Malformed input.
		{"short", header(0x41, 0x43, 0)[:17], ddp.ErrShortHeader},
		{"empty", nil, ddp.ErrShortHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateHeader(tt.h); err != tt.err {
				t.Errorf("ValidateHeader(% x) = %v, want %v", tt.h, err, tt.err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		seg     []byte
		err     error
		payload int
	}{
		{"rfc5044", rfc5044Send(), nil, 24},
		{"write", append(header(0xc1, 0x40, 0), 1, 2, 3), nil, 3},
		{"empty", nil, ddp.ErrShortHeader, 0},
		{"ddp version", append([]byte{0x42}, rfc5044Send()[1:]...), ddp.ErrUntaggedVersion, 0},
		{"rdmap version", append([]byte{0x41, 0x83}, rfc5044Send()[2:]...), ErrInvalidVersion, 0},
		{"bad queue", header(0x41, 0x47, 0), ErrUnexpectedOpcode, 0},
	}
	for _, tt := range tests {
		h, p, err := Parse(tt.seg)
		if err != tt.err || len(p) != tt.payload || (err != nil) != (h == nil) {
			t.Errorf("%s: Parse = % x, %d octets, %v; want %d, %v", tt.name, h, len(p), err, tt.payload, tt.err)
		}
	}
}
