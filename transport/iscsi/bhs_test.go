package iscsi

import (
	"bytes"
	"errors"
	"testing"
)

// goldenLogin is a Login Request built by hand from the figure of section
// 11.12: I=1, opcode 0x03; T=1, C=0, CSG=1 (operational), NSG=3 (full
// feature); VersionMax 0, VersionMin 0; DataSegmentLength 37; ISID
// 0x00023d000001 (open-iscsi's OUI format); TSIH 0; ITT 0x12345678; CID 1;
// CmdSN 1; ExpStatSN 2.
var goldenLogin = []byte{
	0x43, 0x87, 0x00, 0x00, // I|0x03, T|CSG=1|NSG=3, VersionMax, VersionMin
	0x00, 0x00, 0x00, 0x25, // TotalAHSLength, DataSegmentLength
	0x00, 0x02, 0x3d, 0x00, 0x00, 0x01, // ISID
	0x00, 0x00, // TSIH
	0x12, 0x34, 0x56, 0x78, // ITT
	0x00, 0x01, 0x00, 0x00, // CID, reserved
	0x00, 0x00, 0x00, 0x01, // CmdSN
	0x00, 0x00, 0x00, 0x02, // ExpStatSN
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
}

func TestLoginGolden(t *testing.T) {
	b, err := Parse(goldenLogin)
	if err != nil {
		t.Fatal(err)
	}
	l, err := AsLoginReq(b)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Immediate() || !l.Transit() || l.Continue() || l.CSG() != 1 || l.NSG() != 3 ||
		l.VersionMax() != 0 || l.VersionMin() != 0 || l.DataSegmentLength() != 37 ||
		l.ISID() != 0x00023d000001 || l.TSIH() != 0 || l.ITT() != 0x12345678 || l.CID() != 1 ||
		l.CmdSN() != 1 || l.ExpStatSN() != 2 || l.PDULen() != 48+40 {
		t.Fatalf("decoded wrongly: % x", []byte(b))
	}

	buf := bytes.Repeat([]byte{0xee}, BHSLen)
	n, err := NewLoginReq(buf)
	if err != nil {
		t.Fatal(err)
	}
	n.SetTransit(true)
	must(t, n.SetCSG(1))
	must(t, n.SetNSG(3))
	must(t, n.SetDataSegmentLength(37))
	must(t, n.SetISID(0x00023d000001))
	n.SetITT(0x12345678)
	n.SetCID(1)
	n.SetCmdSN(1)
	n.SetExpStatSN(2)
	if !bytes.Equal(buf, goldenLogin) {
		t.Fatalf("encoded\n% x\nwant\n% x", buf, goldenLogin)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"47", goldenLogin[:47], ErrShort},
		{"opcode 0x07", append([]byte{0x07}, goldenLogin[1:]...), ErrUnknownOpcode},
		{"opcode 0x11", append([]byte{0x11}, goldenLogin[1:]...), ErrUnknownOpcode},
		{"opcode 0x27", append([]byte{0x27}, goldenLogin[1:]...), ErrUnknownOpcode},
		{"opcode 0x3b", append([]byte{0x3b}, goldenLogin[1:]...), ErrUnknownOpcode},
		{"ok long", append(bytes.Clone(goldenLogin), 1, 2, 3), nil},
		{"reserved bit ignored", append([]byte{0xc3}, goldenLogin[1:]...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err == nil && len(b) != BHSLen {
				t.Fatalf("len %d", len(b))
			}
			if err != nil && b != nil {
				t.Fatal("BHS alongside error")
			}
		})
	}
	if _, err := AsSCSICommand(BHS(goldenLogin)); err != ErrWrongOpcode {
		t.Fatalf("AsSCSICommand(login) = %v", err)
	}
	if _, err := Init(make([]byte, 47), OpNOPOut); err != ErrShortBuffer {
		t.Fatal(err)
	}
	if _, err := Init(make([]byte, 48), 0x07); err != ErrUnknownOpcode {
		t.Fatal(err)
	}
	if _, err := NewReject(make([]byte, 10)); err != ErrShortBuffer {
		t.Fatal(err)
	}
}

func TestBHSCommon(t *testing.T) {
	tests := []struct {
		name  string
		set   func(b BHS)
		check func(b BHS) bool
		off   int
		want  []byte
	}{
		{"Immediate", func(b BHS) { b.SetImmediate(true) }, BHS.Immediate, 0, []byte{0x41}},
		{"Final", func(b BHS) { b.SetFinal(true) }, BHS.Final, 1, []byte{0x80}},
		{"TotalAHSLength", func(b BHS) { b.SetTotalAHSLength(3) }, func(b BHS) bool { return b.TotalAHSLength() == 3 && b.PDULen() == 60 }, 4, []byte{3}},
		{"DataSegmentLength", func(b BHS) { must(t, b.SetDataSegmentLength(0x123457)) }, func(b BHS) bool {
			return b.DataSegmentLength() == 0x123457 && b.PaddedDataLength() == 0x123458 && b.PDULen() == 48+0x123458
		}, 5, []byte{0x12, 0x34, 0x57}},
		{"LUN", func(b BHS) { b.SetLUN(0x4105000000000000) }, func(b BHS) bool { return b.LUN() == 0x4105000000000000 }, 8, []byte{0x41, 0x05, 0, 0, 0, 0, 0, 0}},
		{"ITT", func(b BHS) { b.SetITT(0xcafef00d) }, func(b BHS) bool { return b.ITT() == 0xcafef00d }, 16, []byte{0xca, 0xfe, 0xf0, 0x0d}},
		{"Word", func(b BHS) { b.SetWord(44, 7) }, func(b BHS) bool { return b.Word(44) == 7 }, 44, []byte{0, 0, 0, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Init(make([]byte, BHSLen), OpSCSICommand)
			must(t, err)
			tt.set(b)
			if !tt.check(b) {
				t.Fatalf("getter disagrees: % x", []byte(b))
			}
			if !bytes.Equal(b[tt.off:tt.off+len(tt.want)], tt.want) {
				t.Fatalf("octets at %d = % x, want % x", tt.off, b[tt.off:tt.off+len(tt.want)], tt.want)
			}
		})
	}
	b, _ := Init(make([]byte, BHSLen), OpNOPOut)
	if err := b.SetDataSegmentLength(1 << 24); err != ErrRange {
		t.Fatal(err)
	}
	b.SetImmediate(true)
	b.SetImmediate(false)
	b.SetFinal(true)
	b.SetFinal(false)
	if b[0] != 0 || b[1] != 0 || b.Flags() != 0 {
		t.Fatal("clearing bits")
	}
}

func TestOpcodeString(t *testing.T) {
	tests := []struct {
		op     Opcode
		s      string
		target bool
	}{
		{OpNOPOut, "NOP-Out", false},
		{OpSCSICommand, "SCSI Command", false},
		{OpLoginReq, "Login Request", false},
		{OpSNACKReq, "SNACK Request", false},
		{0x1d, "vendor-specific initiator opcode 0x1d", false},
		{OpSCSIResponse, "SCSI Response", true},
		{OpR2T, "Ready To Transfer (R2T)", true},
		{OpReject, "Reject", true},
		{0x07, "iSCSI opcode 0x7", false},
		{0x40, "iSCSI opcode 0x40", false},
	}
	for _, tt := range tests {
		if tt.op.String() != tt.s || (tt.op.Valid() && tt.op.Target() != tt.target) {
			t.Errorf("%#x: %q target=%v", uint8(tt.op), tt.op.String(), tt.op.Target())
		}
	}
}

func TestLUN(t *testing.T) {
	tests := []struct {
		n    uint16
		octs []byte
	}{
		{0, []byte{0x00, 0x00}},
		{1, []byte{0x00, 0x01}},
		{255, []byte{0x00, 0xff}},
		{256, []byte{0x41, 0x00}},
		{0x1234, []byte{0x52, 0x34}},
		{MaxLUN, []byte{0x7f, 0xff}},
	}
	for _, tt := range tests {
		l, err := MakeLUN(tt.n)
		must(t, err)
		var b [8]byte
		l.Put(b[:])
		want := append(bytes.Clone(tt.octs), 0, 0, 0, 0, 0, 0)
		if !bytes.Equal(b[:], want) {
			t.Fatalf("%d: % x", tt.n, b)
		}
		if n, err := l.Number(); err != nil || n != tt.n {
			t.Fatalf("%d: Number = %d, %v", tt.n, n, err)
		}
	}
	if _, err := MakeLUN(MaxLUN + 1); err != ErrLUNRange {
		t.Fatal(err)
	}
	// Flat space below 256 decodes too.
	if n, err := LUN(0x4005000000000000).Number(); n != 5 || err != nil {
		t.Fatal(n, err)
	}
	for _, bad := range []LUN{0x0105000000000000, 0x0000000100000000, 0x8000000000000000, 0xc000000000000000, 0x0001000000000001} {
		if _, err := bad.Number(); err != ErrLUNFormat {
			t.Errorf("%#x: %v", uint64(bad), err)
		}
	}
}
