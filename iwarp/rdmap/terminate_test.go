package rdmap

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// Copied headers used in the Terminate tables.
var (
	writeHdr   = unhex("c140 00001234 0000000000001000")           // RDMA Write, tagged
	sendHdr    = unhex("4143 00000000 00000000 00000001 00000000") // Send, untagged
	sendInvHdr = unhex("4144 deadbeef 00000000 00000005 00000000") // Send with Invalidate
	rrHdr      = unhex("4141 00000000 00000001 00000001 00000000") // RDMA Read Request
	rrBody     = unhex("00000009 0000000000002000 00001000 00000007 0000000000004000")
)

func TestTerminateLayout(t *testing.T) {
	tests := []struct {
		name            string
		in              string
		len             int
		layer           Layer
		etype           ErrorType
		code            uint8
		err             Error
		m, d, r         bool
		segLen          uint16
		ddpHdr, rdmaHdr []byte
	}{
		{"local catastrophic", "00000000", 4, LayerRDMAP, 0, 0, ErrLocalCatastrophic, false, false, false, 0, nil, nil},
		{"local catastrophic, any code", "00370000", 4, LayerRDMAP, 0, 0x37, ErrLocalCatastrophic, false, false, false, 0, nil, nil},
		{"MPA CRC", "20020000", 4, LayerLLP, TypeMPA, 2, FromMPA(2), false, false, false, 0, nil, nil},
		{"DDP tagged bounds", "1101c000 0020" + hex.EncodeToString(writeHdr), 20, LayerDDP, 1, 1,
			FromDDP(ddp.ErrBaseBounds), true, true, false, 0x20, writeHdr, nil},
		{"DDP untagged too long", "1205c000 0030" + hex.EncodeToString(sendHdr), 24, LayerDDP, 2, 5,
			FromDDP(ddp.ErrMessageTooLong), true, true, false, 0x30, sendHdr, nil},
		{"remote protection on Read Request", "0101e000 002e" + hex.EncodeToString(rrHdr) + hex.EncodeToString(rrBody), 52,
			LayerRDMAP, 1, 1, ErrBaseBounds, true, true, true, 0x2e, rrHdr, rrBody},
		// Linux soft-iWARP sets R for every Remote Protection Error; for a
		// Send with Invalidate it then sends no RDMA header.
		{"soft-iWARP R on Send with Invalidate", "0109e000 0016" + hex.EncodeToString(sendInvHdr), 24,
			LayerRDMAP, 1, 9, ErrProtectionCannotInvalidate, true, true, true, 0x16, sendInvHdr, nil},
		{"R without D", "01002000" + hex.EncodeToString(rrBody), 32, LayerRDMAP, 1, 0, ErrInvalidSTag,
			false, false, true, 0, nil, rrBody},
		{"M without D", "02068000 0012", 6, LayerRDMAP, 2, 6, ErrUnexpectedOpcode, true, false, false, 0x12, nil, nil},
		{"D without M", "02054000 0000" + hex.EncodeToString(sendHdr), 24, LayerRDMAP, 2, 5, ErrInvalidVersion,
			false, true, false, 0, sendHdr, nil},
		{"reserved bits ignored", "02081fff", 4, LayerRDMAP, 2, 8, ErrCatastrophicGlobal, false, false, false, 0, nil, nil},
		{"trailing octets ignored", "02070000 ffffffff", 4, LayerRDMAP, 2, 7, ErrCatastrophicStream, false, false, false, 0, nil, nil},
		{"trailing zero headers", "02ff0000" + strings.Repeat("00", 48), 4, LayerRDMAP, 2, 0xff, ErrOperationUnspecified,
			false, false, false, 0, nil, nil},
		{"reserved layer", "f3450000", 4, 0xf, 3, 0x45, Error{0xf, 3, 0x45}, false, false, false, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := unhex(tt.in)
			term, err := ParseTerminate(in)
			if err != nil {
				t.Fatalf("ParseTerminate: %v", err)
			}
			if len(term) != tt.len || term.Len() != tt.len || cap(term) != tt.len {
				t.Errorf("len %d Len() %d cap %d, want %d", len(term), term.Len(), cap(term), tt.len)
			}
			if term.Layer() != tt.layer || term.EType() != tt.etype || term.ErrorCode() != tt.code || term.Err() != tt.err {
				t.Errorf("layer %v etype %d code %#x err %v", term.Layer(), term.EType(), term.ErrorCode(), term.Err())
			}
			if term.M() != tt.m || term.D() != tt.d || term.R() != tt.r || term.SegmentLength() != tt.segLen {
				t.Errorf("M %v D %v R %v segment length %d", term.M(), term.D(), term.R(), term.SegmentLength())
			}
			if !bytes.Equal(term.DDPHeader(), tt.ddpHdr) || (term.DDPHeader() == nil) != (tt.ddpHdr == nil) {
				t.Errorf("DDP header % x, want % x", term.DDPHeader(), tt.ddpHdr)
			}
			if !bytes.Equal(term.RDMAHeader(), tt.rdmaHdr) || (term.RDMAHeader() == nil) != (tt.rdmaHdr == nil) {
				t.Errorf("RDMA header % x, want % x", term.RDMAHeader(), tt.rdmaHdr)
			}

			// Re-encode from the accessors: the same octets, except that the
			// reserved bits are zero on transmit and R is only sent with an
			// RDMA header.
			f := TerminateFields{
				Err:                Error{term.Layer(), term.EType(), term.ErrorCode()},
				SegmentLength:      term.SegmentLength(),
				SegmentLengthValid: term.M(),
				DDPHeader:          term.DDPHeader(),
				RDMAHeader:         term.RDMAHeader(),
			}
			want := bytes.Clone(in[:tt.len])
			want[2] &= 0xe0
			want[3] = 0
			if tt.rdmaHdr == nil {
				want[2] &^= 0x20
			}
			out := make([]byte, MaxTerminateLen)
			n, err := f.Encode(out)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if l, _ := f.Len(); l != n || !bytes.Equal(out[:n], want) {
				t.Errorf("Encode = % x (Len %d), want % x", out[:n], l, want)
			}
		})
	}
}

func TestParseTerminateShort(t *testing.T) {
	tests := []string{
		"",
		"000000",
		"0000c000",      // M and D, no segment length
		"00008000 00",   // M, half a segment length
		"0000c000 0000", // D, no header
		"00004000 0000 81" + strings.Repeat("00", 12), // tagged header needs 14
		"00004000 0000 41" + strings.Repeat("00", 16), // untagged header needs 18
		"0000e000 0000" + hex.EncodeToString(rrHdr) + hex.EncodeToString(rrBody[:27]),
		"00002000" + hex.EncodeToString(rrBody[:27]),
	}
	for _, in := range tests {
		b := unhex(in)
		term, err := ParseTerminate(b)
		if err != ErrShortTerminate || term != nil {
			t.Errorf("ParseTerminate(%s) = % x, %v", in, term, err)
		}
		if len(b) >= TerminateControlLen {
			// The accessors of optional parts never panic on short input.
			raw := Terminate(b)
			if raw.Len() != 0 || raw.DDPHeader() != nil || raw.RDMAHeader() != nil || raw.SegmentLength() != 0 {
				t.Errorf("accessors of short %s returned parts", in)
			}
		}
	}
}

func TestTerminateEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		f    TerminateFields
		buf  int
		err  error
	}{
		{"short buffer", TerminateFields{}, 3, ErrShortBuffer},
		{"short buffer for headers", TerminateFields{DDPHeader: rrHdr, RDMAHeader: rrBody}, 51, ErrShortBuffer},
		{"exact buffer", TerminateFields{DDPHeader: rrHdr, RDMAHeader: rrBody}, 52, nil},
		{"layer too wide", TerminateFields{Err: Error{Layer: 0x10}}, 64, ErrErrorNumber},
		{"type too wide", TerminateFields{Err: Error{Type: 0x10}}, 64, ErrErrorNumber},
		{"empty DDP header", TerminateFields{DDPHeader: ddp.Header{}}, 64, ErrTerminatedHeader},
		{"short tagged header", TerminateFields{DDPHeader: writeHdr[:13]}, 64, ErrTerminatedHeader},
		{"short untagged header", TerminateFields{DDPHeader: sendHdr[:14]}, 64, ErrTerminatedHeader},
		{"short RDMA header", TerminateFields{RDMAHeader: rrBody[:27]}, 64, ErrTerminatedRDMAHeader},
		{"RDMA header of a Send", TerminateFields{DDPHeader: sendInvHdr, RDMAHeader: rrBody}, 64, ErrTerminatedRDMAHeader},
		{"RDMA header of a Write", TerminateFields{DDPHeader: writeHdr, RDMAHeader: rrBody}, 64, ErrTerminatedRDMAHeader},
	}
	for _, tt := range tests {
		b := bytes.Repeat([]byte{0xee}, tt.buf)
		n, err := tt.f.Encode(b)
		if err != tt.err {
			t.Errorf("%s: Encode = %d, %v; want %v", tt.name, n, err, tt.err)
		}
		if err != nil && !bytes.Equal(b, bytes.Repeat([]byte{0xee}, tt.buf)) {
			t.Errorf("%s: Encode wrote on error", tt.name)
		}
	}
	// A whole received segment may be passed; only its header is copied.
	seg := append(bytes.Clone(sendHdr), 1, 2, 3)
	b := make([]byte, MaxTerminateLen)
	n, err := TerminateFields{Err: FromDDP(ddp.ErrInvalidMO), DDPHeader: seg, SegmentLength: 21, SegmentLengthValid: true}.Encode(b)
	if err != nil || n != 24 || !bytes.Equal(b[6:n], sendHdr) {
		t.Errorf("segment as header: % x, %v", b[:n], err)
	}
}

func TestNewTerminate(t *testing.T) {
	tests := []struct {
		name    string
		e       Error
		hdr     ddp.Header
		rr      ReadRequest
		m, d, r bool
		len     int
	}{
		{"local catastrophic", ErrLocalCatastrophic, sendHdr, rrBody, false, false, false, 4},
		{"catastrophic stream", ErrCatastrophicStream, sendHdr, nil, true, true, false, 24},
		{"DDP tagged", FromDDP(ddp.ErrBaseBounds), writeHdr, nil, true, true, false, 20},
		{"DDP untagged", FromDDP(ddp.ErrMSNRange), sendHdr, rrBody, true, true, false, 24},
		{"DDP local catastrophic", FromDDP(ddp.ErrLocalCatastrophic), sendHdr, nil, false, false, false, 4},
		{"DDP version, layout unknown", FromDDP(ddp.ErrTaggedVersion), nil, nil, false, false, false, 4},
		{"protection on Read Request", ErrAccessRights, rrHdr, rrBody, true, true, true, 52},
		{"protection on Send with Invalidate", ErrInvalidSTag, sendInvHdr, rrBody, true, true, false, 24},
		{"cannot invalidate", ErrProtectionCannotInvalidate, sendInvHdr, nil, true, true, false, 24},
		{"protection, only RDMA header", ErrTOWrap, nil, rrBody, false, false, true, 32},
		{"operation error", ErrUnexpectedOpcode, rrHdr, rrBody, true, true, false, 24},
		{"version, layout unknown", ErrInvalidVersion, nil, nil, false, false, false, 4},
		{"MPA", FromMPA(3), sendHdr, rrBody, false, false, false, 4},
		{"short header", ErrInvalidSTag, ddp.Header{0x41}, rrBody, true, true, false, 0},
	}
	for _, tt := range tests {
		f := NewTerminate(tt.e, tt.hdr, 77, tt.rr)
		if f.Err != tt.e || f.SegmentLengthValid != tt.m || (f.DDPHeader != nil) != tt.d || (f.RDMAHeader != nil) != tt.r {
			t.Errorf("%s: %+v", tt.name, f)
			continue
		}
		b := make([]byte, MaxTerminateLen)
		n, err := f.Encode(b)
		if tt.len == 0 {
			if err != ErrTerminatedHeader {
				t.Errorf("%s: Encode = %v", tt.name, err)
			}
			continue
		}
		if err != nil || n != tt.len {
			t.Errorf("%s: Encode = %d, %v; want %d", tt.name, n, err, tt.len)
			continue
		}
		term, err := ParseTerminate(b[:n])
		if err != nil || term.Err() != tt.e || term.M() != tt.m || term.D() != tt.d || term.R() != tt.r {
			t.Errorf("%s: parsed back %v M %v D %v R %v, %v", tt.name, term.Err(), term.M(), term.D(), term.R(), err)
		}
		if tt.m && term.SegmentLength() != 77 {
			t.Errorf("%s: segment length %d", tt.name, term.SegmentLength())
		}
	}
}
