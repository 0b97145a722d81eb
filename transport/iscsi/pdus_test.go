package iscsi

import (
	"bytes"
	"testing"
)

// field is one row of TestFields: set a field through a view's setter,
// read it back through the getter, and find it at the octets the RFC's
// figure puts it (offsets typed here from the figures, independently of
// pdus.go).
type field struct {
	name string
	op   Opcode
	set  func(b BHS) error
	get  func(b BHS) uint64
	want uint64
	off  int
	octs []byte
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func TestFields(t *testing.T) {
	tests := []field{
		// SCSI Command, 11.3
		{"SCSICommand R", OpSCSICommand, func(b BHS) error { SCSICommand{b}.SetRead(true); return nil }, func(b BHS) uint64 { return b2u(SCSICommand{b}.Read()) }, 1, 1, []byte{0x40}},
		{"SCSICommand W", OpSCSICommand, func(b BHS) error { SCSICommand{b}.SetWrite(true); return nil }, func(b BHS) uint64 { return b2u(SCSICommand{b}.Write()) }, 1, 1, []byte{0x20}},
		{"SCSICommand ATTR", OpSCSICommand, func(b BHS) error { return SCSICommand{b}.SetAttr(4) }, func(b BHS) uint64 { return uint64(SCSICommand{b}.Attr()) }, 4, 1, []byte{0x04}},
		{"SCSICommand EDTL", OpSCSICommand, func(b BHS) error { SCSICommand{b}.SetExpectedDataTransferLength(0x10000); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{b}.ExpectedDataTransferLength()) }, 0x10000, 20, []byte{0, 1, 0, 0}},
		{"SCSICommand CmdSN", OpSCSICommand, func(b BHS) error { SCSICommand{b}.SetCmdSN(0x01020304); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{b}.CmdSN()) }, 0x01020304, 24, []byte{1, 2, 3, 4}},
		{"SCSICommand ExpStatSN", OpSCSICommand, func(b BHS) error { SCSICommand{b}.SetExpStatSN(9); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{b}.ExpStatSN()) }, 9, 28, []byte{0, 0, 0, 9}},
		{"SCSICommand CDB", OpSCSICommand, func(b BHS) error { return SCSICommand{b}.SetCDB([]byte{0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0}) }, func(b BHS) uint64 { return uint64(SCSICommand{b}.CDB()[0]) }, 0x28, 32, []byte{0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
		// SCSI Response, 11.4
		{"SCSIResponse o", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetBidiOverflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{b}.BidiOverflow()) }, 1, 1, []byte{0x90}},
		{"SCSIResponse u", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetBidiUnderflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{b}.BidiUnderflow()) }, 1, 1, []byte{0x88}},
		{"SCSIResponse O", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetOverflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{b}.Overflow()) }, 1, 1, []byte{0x84}},
		{"SCSIResponse U", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetUnderflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{b}.Underflow()) }, 1, 1, []byte{0x82}},
		{"SCSIResponse Response", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetResponse(1); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.Response()) }, 1, 2, []byte{1}},
		{"SCSIResponse Status", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetStatus(0x02); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.Status()) }, 2, 3, []byte{2}},
		{"SCSIResponse SNACKTag", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetSNACKTag(5); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.SNACKTag()) }, 5, 20, []byte{0, 0, 0, 5}},
		{"SCSIResponse StatSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetStatSN(6); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.StatSN()) }, 6, 24, []byte{0, 0, 0, 6}},
		{"SCSIResponse ExpCmdSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetExpCmdSN(7); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.ExpCmdSN()) }, 7, 28, []byte{0, 0, 0, 7}},
		{"SCSIResponse MaxCmdSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetMaxCmdSN(8); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.MaxCmdSN()) }, 8, 32, []byte{0, 0, 0, 8}},
		{"SCSIResponse ExpDataSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetExpDataSN(9); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.ExpDataSN()) }, 9, 36, []byte{0, 0, 0, 9}},
		{"SCSIResponse BidiResid", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetBidiReadResidualCount(10); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.BidiReadResidualCount()) }, 10, 40, []byte{0, 0, 0, 10}},
		{"SCSIResponse Resid", OpSCSIResponse, func(b BHS) error { SCSIResponse{b}.SetResidualCount(11); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{b}.ResidualCount()) }, 11, 44, []byte{0, 0, 0, 11}},
		// Task Management, 11.5 and 11.6
		{"TaskMgmtReq Function", OpTaskMgmtReq, func(b BHS) error { return TaskMgmtReq{b}.SetFunction(1) }, func(b BHS) uint64 { return uint64(TaskMgmtReq{b}.Function()) }, 1, 1, []byte{0x81}},
		{"TaskMgmtReq RTT", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{b}.SetReferencedTaskTag(3); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{b}.ReferencedTaskTag()) }, 3, 20, []byte{0, 0, 0, 3}},
		{"TaskMgmtReq RefCmdSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{b}.SetRefCmdSN(4); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{b}.RefCmdSN()) }, 4, 32, []byte{0, 0, 0, 4}},
		{"TaskMgmtReq ExpDataSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{b}.SetExpDataSN(5); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{b}.ExpDataSN()) }, 5, 36, []byte{0, 0, 0, 5}},
		{"TaskMgmtReq CmdSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{b}.SetCmdSN(6); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{b}.CmdSN()) }, 6, 24, []byte{0, 0, 0, 6}},
		{"TaskMgmtResp Response", OpTaskMgmtResp, func(b BHS) error { TaskMgmtResp{b}.SetResponse(255); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtResp{b}.Response()) }, 255, 2, []byte{255}},
		{"TaskMgmtResp MaxCmdSN", OpTaskMgmtResp, func(b BHS) error { TaskMgmtResp{b}.SetMaxCmdSN(2); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtResp{b}.MaxCmdSN()) }, 2, 32, []byte{0, 0, 0, 2}},
		// Login, 11.12 and 11.13
		{"LoginReq C", OpLoginReq, func(b BHS) error { LoginReq{b}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(LoginReq{b}.Continue()) }, 1, 1, []byte{0x40}},
		{"LoginReq CSG", OpLoginReq, func(b BHS) error { return LoginReq{b}.SetCSG(3) }, func(b BHS) uint64 { return uint64(LoginReq{b}.CSG()) }, 3, 1, []byte{0x0c}},
		{"LoginReq VersionMin", OpLoginReq, func(b BHS) error { LoginReq{b}.SetVersionMin(2); return nil }, func(b BHS) uint64 { return uint64(LoginReq{b}.VersionMin()) }, 2, 3, []byte{2}},
		{"LoginReq TSIH", OpLoginReq, func(b BHS) error { LoginReq{b}.SetTSIH(0xabcd); return nil }, func(b BHS) uint64 { return uint64(LoginReq{b}.TSIH()) }, 0xabcd, 14, []byte{0xab, 0xcd}},
		{"LoginResp T", OpLoginResp, func(b BHS) error { LoginResp{b}.SetTransit(true); return nil }, func(b BHS) uint64 { return b2u(LoginResp{b}.Transit()) }, 1, 1, []byte{0x80}},
		{"LoginResp NSG", OpLoginResp, func(b BHS) error { return LoginResp{b}.SetNSG(1) }, func(b BHS) uint64 { return uint64(LoginResp{b}.NSG()) }, 1, 1, []byte{0x01}},
		{"LoginResp VersionMax", OpLoginResp, func(b BHS) error { LoginResp{b}.SetVersionMax(1); return nil }, func(b BHS) uint64 { return uint64(LoginResp{b}.VersionMax()) }, 1, 2, []byte{1}},
		{"LoginResp VersionActive", OpLoginResp, func(b BHS) error { LoginResp{b}.SetVersionActive(3); return nil }, func(b BHS) uint64 { return uint64(LoginResp{b}.VersionActive()) }, 3, 3, []byte{3}},
		{"LoginResp ISID", OpLoginResp, func(b BHS) error { return LoginResp{b}.SetISID(0x800000000001) }, func(b BHS) uint64 { return LoginResp{b}.ISID() }, 0x800000000001, 8, []byte{0x80, 0, 0, 0, 0, 1}},
		{"LoginResp StatSN", OpLoginResp, func(b BHS) error { LoginResp{b}.SetStatSN(12); return nil }, func(b BHS) uint64 { return uint64(LoginResp{b}.StatSN()) }, 12, 24, []byte{0, 0, 0, 12}},
		{"LoginResp StatusClass", OpLoginResp, func(b BHS) error { LoginResp{b}.SetStatusClass(2); return nil }, func(b BHS) uint64 { return uint64(LoginResp{b}.StatusClass()) }, 2, 36, []byte{2}},
		{"LoginResp StatusDetail", OpLoginResp, func(b BHS) error { LoginResp{b}.SetStatusDetail(1); return nil }, func(b BHS) uint64 { return uint64(LoginResp{b}.StatusDetail()) }, 1, 37, []byte{1}},
		// Text, 11.10 and 11.11
		{"TextReq C", OpTextReq, func(b BHS) error { TextReq{b}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(TextReq{b}.Continue()) }, 1, 1, []byte{0xc0}},
		{"TextReq TTT", OpTextReq, func(b BHS) error { TextReq{b}.SetTTT(ReservedITT); return nil }, func(b BHS) uint64 { return uint64(TextReq{b}.TTT()) }, 0xffffffff, 20, []byte{0xff, 0xff, 0xff, 0xff}},
		{"TextReq ExpStatSN", OpTextReq, func(b BHS) error { TextReq{b}.SetExpStatSN(3); return nil }, func(b BHS) uint64 { return uint64(TextReq{b}.ExpStatSN()) }, 3, 28, []byte{0, 0, 0, 3}},
		{"TextResp C", OpTextResp, func(b BHS) error { TextResp{b}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(TextResp{b}.Continue()) }, 1, 1, []byte{0xc0}},
		{"TextResp TTT", OpTextResp, func(b BHS) error { TextResp{b}.SetTTT(4); return nil }, func(b BHS) uint64 { return uint64(TextResp{b}.TTT()) }, 4, 20, []byte{0, 0, 0, 4}},
		{"TextResp ExpCmdSN", OpTextResp, func(b BHS) error { TextResp{b}.SetExpCmdSN(5); return nil }, func(b BHS) uint64 { return uint64(TextResp{b}.ExpCmdSN()) }, 5, 28, []byte{0, 0, 0, 5}},
		// Logout, 11.14 and 11.15
		{"LogoutReq Reason", OpLogoutReq, func(b BHS) error { return LogoutReq{b}.SetReasonCode(2) }, func(b BHS) uint64 { return uint64(LogoutReq{b}.ReasonCode()) }, 2, 1, []byte{0x82}},
		{"LogoutReq CID", OpLogoutReq, func(b BHS) error { LogoutReq{b}.SetCID(7); return nil }, func(b BHS) uint64 { return uint64(LogoutReq{b}.CID()) }, 7, 20, []byte{0, 7}},
		{"LogoutResp Response", OpLogoutResp, func(b BHS) error { LogoutResp{b}.SetResponse(3); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{b}.Response()) }, 3, 2, []byte{3}},
		{"LogoutResp Time2Wait", OpLogoutResp, func(b BHS) error { LogoutResp{b}.SetTime2Wait(2); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{b}.Time2Wait()) }, 2, 40, []byte{0, 2}},
		{"LogoutResp Time2Retain", OpLogoutResp, func(b BHS) error { LogoutResp{b}.SetTime2Retain(20); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{b}.Time2Retain()) }, 20, 42, []byte{0, 20}},
		// NOP, 11.18 and 11.19
		{"NOPOut TTT", OpNOPOut, func(b BHS) error { NOPOut{b}.SetTTT(0x11); return nil }, func(b BHS) uint64 { return uint64(NOPOut{b}.TTT()) }, 0x11, 20, []byte{0, 0, 0, 0x11}},
		{"NOPOut CmdSN", OpNOPOut, func(b BHS) error { NOPOut{b}.SetCmdSN(1); return nil }, func(b BHS) uint64 { return uint64(NOPOut{b}.CmdSN()) }, 1, 24, []byte{0, 0, 0, 1}},
		{"NOPIn TTT", OpNOPIn, func(b BHS) error { NOPIn{b}.SetTTT(0x12); return nil }, func(b BHS) uint64 { return uint64(NOPIn{b}.TTT()) }, 0x12, 20, []byte{0, 0, 0, 0x12}},
		{"NOPIn MaxCmdSN", OpNOPIn, func(b BHS) error { NOPIn{b}.SetMaxCmdSN(64); return nil }, func(b BHS) uint64 { return uint64(NOPIn{b}.MaxCmdSN()) }, 64, 32, []byte{0, 0, 0, 64}},
		// Reject, 11.17
		{"Reject Reason", OpReject, func(b BHS) error { Reject{b}.SetReason(0x09); return nil }, func(b BHS) uint64 { return uint64(Reject{b}.Reason()) }, 9, 2, []byte{9}},
		{"Reject DataSN", OpReject, func(b BHS) error { Reject{b}.SetDataSN(3); return nil }, func(b BHS) uint64 { return uint64(Reject{b}.DataSN()) }, 3, 36, []byte{0, 0, 0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Init(make([]byte, BHSLen), tt.op)
			must(t, err)
			if tt.off == 1 && tt.octs[0]&0x80 != 0 {
				b.SetFinal(true)
			}
			before := bytes.Clone(b)
			must(t, tt.set(b))
			if got := tt.get(b); got != tt.want {
				t.Fatalf("get = %#x, want %#x", got, tt.want)
			}
			if !bytes.Equal(b[tt.off:tt.off+len(tt.octs)], tt.octs) {
				t.Fatalf("octets at %d = % x, want % x", tt.off, b[tt.off:tt.off+len(tt.octs)], tt.octs)
			}
			// Nothing else moved.
			copy(before[tt.off:], tt.octs)
			if !bytes.Equal(b, before) {
				t.Fatalf("other octets changed: % x", []byte(b))
			}
		})
	}
}

func TestNewViews(t *testing.T) {
	tests := []struct {
		name   string
		mk     func([]byte) (BHS, error)
		b0, b1 byte
	}{
		{"NOPOut", func(p []byte) (BHS, error) { v, err := NewNOPOut(p); return v.BHS, err }, 0x00, 0x80},
		{"SCSICommand", func(p []byte) (BHS, error) { v, err := NewSCSICommand(p); return v.BHS, err }, 0x01, 0x00},
		{"TaskMgmtReq", func(p []byte) (BHS, error) { v, err := NewTaskMgmtReq(p); return v.BHS, err }, 0x02, 0x80},
		{"LoginReq", func(p []byte) (BHS, error) { v, err := NewLoginReq(p); return v.BHS, err }, 0x43, 0x00},
		{"TextReq", func(p []byte) (BHS, error) { v, err := NewTextReq(p); return v.BHS, err }, 0x04, 0x80},
		{"LogoutReq", func(p []byte) (BHS, error) { v, err := NewLogoutReq(p); return v.BHS, err }, 0x06, 0x80},
		{"NOPIn", func(p []byte) (BHS, error) { v, err := NewNOPIn(p); return v.BHS, err }, 0x20, 0x80},
		{"SCSIResponse", func(p []byte) (BHS, error) { v, err := NewSCSIResponse(p); return v.BHS, err }, 0x21, 0x80},
		{"TaskMgmtResp", func(p []byte) (BHS, error) { v, err := NewTaskMgmtResp(p); return v.BHS, err }, 0x22, 0x80},
		{"LoginResp", func(p []byte) (BHS, error) { v, err := NewLoginResp(p); return v.BHS, err }, 0x23, 0x00},
		{"TextResp", func(p []byte) (BHS, error) { v, err := NewTextResp(p); return v.BHS, err }, 0x24, 0x80},
		{"LogoutResp", func(p []byte) (BHS, error) { v, err := NewLogoutResp(p); return v.BHS, err }, 0x26, 0x80},
		{"Reject", func(p []byte) (BHS, error) { v, err := NewReject(p); return v.BHS, err }, 0x3f, 0x80},
	}
	for _, tt := range tests {
		b, err := tt.mk(bytes.Repeat([]byte{0xaa}, 64))
		must(t, err)
		if len(b) != BHSLen || b[0] != tt.b0 || b[1] != tt.b1 {
			t.Errorf("%s: % x", tt.name, []byte(b[:2]))
		}
		wantITT := uint32(0)
		if tt.name == "Reject" {
			wantITT = ReservedITT
		}
		if b.ITT() != wantITT || b.Word(44) != 0 {
			t.Errorf("%s: not cleared: % x", tt.name, []byte(b))
		}
		if _, err := tt.mk(make([]byte, 47)); err != ErrShortBuffer {
			t.Errorf("%s short: %v", tt.name, err)
		}
	}
}

func TestSetterRanges(t *testing.T) {
	buf := make([]byte, BHSLen)
	c, _ := NewSCSICommand(buf)
	l, _ := NewLoginReq(make([]byte, BHSLen))
	tm, _ := NewTaskMgmtReq(make([]byte, BHSLen))
	lo, _ := NewLogoutReq(make([]byte, BHSLen))
	for i, err := range []error{
		c.SetAttr(8), c.SetCDB(make([]byte, 17)), l.SetCSG(4), l.SetNSG(4), l.SetISID(1 << 48),
		tm.SetFunction(0x80), lo.SetReasonCode(0x80),
	} {
		if err != ErrRange {
			t.Errorf("%d: %v", i, err)
		}
	}
	if tm.Final() != true || lo.Final() != true {
		t.Error("F bit lost by a rejected setter")
	}
	// SetCDB clears what a longer CDB left.
	must(t, c.SetCDB(bytes.Repeat([]byte{1}, 16)))
	must(t, c.SetCDB([]byte{0x12, 0, 0, 0, 0x24, 0}))
	if !bytes.Equal(c.CDB(), []byte{0x12, 0, 0, 0, 0x24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("CDB % x", c.CDB())
	}
	// Clearing flags.
	c.SetRead(true)
	c.SetRead(false)
	if c.Read() || c.Flags() != 0 {
		t.Fatal("R not cleared")
	}
}
