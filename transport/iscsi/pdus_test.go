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
		{"SCSICommand R", OpSCSICommand, func(b BHS) error { SCSICommand{InitiatorSNs{b}}.SetRead(true); return nil }, func(b BHS) uint64 { return b2u(SCSICommand{InitiatorSNs{b}}.Read()) }, 1, 1, []byte{0x40}},
		{"SCSICommand W", OpSCSICommand, func(b BHS) error { SCSICommand{InitiatorSNs{b}}.SetWrite(true); return nil }, func(b BHS) uint64 { return b2u(SCSICommand{InitiatorSNs{b}}.Write()) }, 1, 1, []byte{0x20}},
		{"SCSICommand ATTR", OpSCSICommand, func(b BHS) error { return SCSICommand{InitiatorSNs{b}}.SetAttr(4) }, func(b BHS) uint64 { return uint64(SCSICommand{InitiatorSNs{b}}.Attr()) }, 4, 1, []byte{0x04}},
		{"SCSICommand EDTL", OpSCSICommand, func(b BHS) error { SCSICommand{InitiatorSNs{b}}.SetExpectedDataTransferLength(0x10000); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{InitiatorSNs{b}}.ExpectedDataTransferLength()) }, 0x10000, 20, []byte{0, 1, 0, 0}},
		{"SCSICommand CmdSN", OpSCSICommand, func(b BHS) error { SCSICommand{InitiatorSNs{b}}.SetCmdSN(0x01020304); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{InitiatorSNs{b}}.CmdSN()) }, 0x01020304, 24, []byte{1, 2, 3, 4}},
		{"SCSICommand ExpStatSN", OpSCSICommand, func(b BHS) error { SCSICommand{InitiatorSNs{b}}.SetExpStatSN(9); return nil }, func(b BHS) uint64 { return uint64(SCSICommand{InitiatorSNs{b}}.ExpStatSN()) }, 9, 28, []byte{0, 0, 0, 9}},
		{"SCSICommand CDB", OpSCSICommand, func(b BHS) error { return SCSICommand{InitiatorSNs{b}}.SetCDB([]byte{0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0}) }, func(b BHS) uint64 { return uint64(SCSICommand{InitiatorSNs{b}}.CDB()[0]) }, 0x28, 32, []byte{0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
		// SCSI Response, 11.4
		{"SCSIResponse o", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetBidiOverflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{TargetSNs{b}}.BidiOverflow()) }, 1, 1, []byte{0x90}},
		{"SCSIResponse u", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetBidiUnderflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{TargetSNs{b}}.BidiUnderflow()) }, 1, 1, []byte{0x88}},
		{"SCSIResponse O", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetOverflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{TargetSNs{b}}.Overflow()) }, 1, 1, []byte{0x84}},
		{"SCSIResponse U", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetUnderflow(true); return nil }, func(b BHS) uint64 { return b2u(SCSIResponse{TargetSNs{b}}.Underflow()) }, 1, 1, []byte{0x82}},
		{"SCSIResponse Response", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetResponse(1); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.Response()) }, 1, 2, []byte{1}},
		{"SCSIResponse Status", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetStatus(0x02); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.Status()) }, 2, 3, []byte{2}},
		{"SCSIResponse SNACKTag", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetSNACKTag(5); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.SNACKTag()) }, 5, 20, []byte{0, 0, 0, 5}},
		{"SCSIResponse StatSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetStatSN(6); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.StatSN()) }, 6, 24, []byte{0, 0, 0, 6}},
		{"SCSIResponse ExpCmdSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetExpCmdSN(7); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.ExpCmdSN()) }, 7, 28, []byte{0, 0, 0, 7}},
		{"SCSIResponse MaxCmdSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetMaxCmdSN(8); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.MaxCmdSN()) }, 8, 32, []byte{0, 0, 0, 8}},
		{"SCSIResponse ExpDataSN", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetExpDataSN(9); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.ExpDataSN()) }, 9, 36, []byte{0, 0, 0, 9}},
		{"SCSIResponse BidiResid", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetBidiReadResidualCount(10); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.BidiReadResidualCount()) }, 10, 40, []byte{0, 0, 0, 10}},
		{"SCSIResponse Resid", OpSCSIResponse, func(b BHS) error { SCSIResponse{TargetSNs{b}}.SetResidualCount(11); return nil }, func(b BHS) uint64 { return uint64(SCSIResponse{TargetSNs{b}}.ResidualCount()) }, 11, 44, []byte{0, 0, 0, 11}},
		// Task Management, 11.5 and 11.6
		{"TaskMgmtReq Function", OpTaskMgmtReq, func(b BHS) error { return TaskMgmtReq{InitiatorSNs{b}}.SetFunction(1) }, func(b BHS) uint64 { return uint64(TaskMgmtReq{InitiatorSNs{b}}.Function()) }, 1, 1, []byte{0x81}},
		{"TaskMgmtReq RTT", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{InitiatorSNs{b}}.SetReferencedTaskTag(3); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{InitiatorSNs{b}}.ReferencedTaskTag()) }, 3, 20, []byte{0, 0, 0, 3}},
		{"TaskMgmtReq RefCmdSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{InitiatorSNs{b}}.SetRefCmdSN(4); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{InitiatorSNs{b}}.RefCmdSN()) }, 4, 32, []byte{0, 0, 0, 4}},
		{"TaskMgmtReq ExpDataSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{InitiatorSNs{b}}.SetExpDataSN(5); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{InitiatorSNs{b}}.ExpDataSN()) }, 5, 36, []byte{0, 0, 0, 5}},
		{"TaskMgmtReq CmdSN", OpTaskMgmtReq, func(b BHS) error { TaskMgmtReq{InitiatorSNs{b}}.SetCmdSN(6); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtReq{InitiatorSNs{b}}.CmdSN()) }, 6, 24, []byte{0, 0, 0, 6}},
		{"TaskMgmtResp Response", OpTaskMgmtResp, func(b BHS) error { TaskMgmtResp{TargetSNs{b}}.SetResponse(255); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtResp{TargetSNs{b}}.Response()) }, 255, 2, []byte{255}},
		{"TaskMgmtResp MaxCmdSN", OpTaskMgmtResp, func(b BHS) error { TaskMgmtResp{TargetSNs{b}}.SetMaxCmdSN(2); return nil }, func(b BHS) uint64 { return uint64(TaskMgmtResp{TargetSNs{b}}.MaxCmdSN()) }, 2, 32, []byte{0, 0, 0, 2}},
		// Login, 11.12 and 11.13
		{"LoginReq C", OpLoginReq, func(b BHS) error { LoginReq{InitiatorSNs{b}}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(LoginReq{InitiatorSNs{b}}.Continue()) }, 1, 1, []byte{0x40}},
		{"LoginReq CSG", OpLoginReq, func(b BHS) error { return LoginReq{InitiatorSNs{b}}.SetCSG(3) }, func(b BHS) uint64 { return uint64(LoginReq{InitiatorSNs{b}}.CSG()) }, 3, 1, []byte{0x0c}},
		{"LoginReq VersionMin", OpLoginReq, func(b BHS) error { LoginReq{InitiatorSNs{b}}.SetVersionMin(2); return nil }, func(b BHS) uint64 { return uint64(LoginReq{InitiatorSNs{b}}.VersionMin()) }, 2, 3, []byte{2}},
		{"LoginReq TSIH", OpLoginReq, func(b BHS) error { LoginReq{InitiatorSNs{b}}.SetTSIH(0xabcd); return nil }, func(b BHS) uint64 { return uint64(LoginReq{InitiatorSNs{b}}.TSIH()) }, 0xabcd, 14, []byte{0xab, 0xcd}},
		{"LoginResp T", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetTransit(true); return nil }, func(b BHS) uint64 { return b2u(LoginResp{TargetSNs{b}}.Transit()) }, 1, 1, []byte{0x80}},
		{"LoginResp NSG", OpLoginResp, func(b BHS) error { return LoginResp{TargetSNs{b}}.SetNSG(1) }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.NSG()) }, 1, 1, []byte{0x01}},
		{"LoginResp VersionMax", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetVersionMax(1); return nil }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.VersionMax()) }, 1, 2, []byte{1}},
		{"LoginResp VersionActive", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetVersionActive(3); return nil }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.VersionActive()) }, 3, 3, []byte{3}},
		{"LoginResp ISID", OpLoginResp, func(b BHS) error { return LoginResp{TargetSNs{b}}.SetISID(0x800000000001) }, func(b BHS) uint64 { return LoginResp{TargetSNs{b}}.ISID() }, 0x800000000001, 8, []byte{0x80, 0, 0, 0, 0, 1}},
		{"LoginResp StatSN", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetStatSN(12); return nil }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.StatSN()) }, 12, 24, []byte{0, 0, 0, 12}},
		{"LoginResp StatusClass", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetStatusClass(2); return nil }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.StatusClass()) }, 2, 36, []byte{2}},
		{"LoginResp StatusDetail", OpLoginResp, func(b BHS) error { LoginResp{TargetSNs{b}}.SetStatusDetail(1); return nil }, func(b BHS) uint64 { return uint64(LoginResp{TargetSNs{b}}.StatusDetail()) }, 1, 37, []byte{1}},
		// Text, 11.10 and 11.11
		{"TextReq C", OpTextReq, func(b BHS) error { TextReq{InitiatorSNs{b}}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(TextReq{InitiatorSNs{b}}.Continue()) }, 1, 1, []byte{0xc0}},
		{"TextReq TTT", OpTextReq, func(b BHS) error { TextReq{InitiatorSNs{b}}.SetTTT(ReservedITT); return nil }, func(b BHS) uint64 { return uint64(TextReq{InitiatorSNs{b}}.TTT()) }, 0xffffffff, 20, []byte{0xff, 0xff, 0xff, 0xff}},
		{"TextReq ExpStatSN", OpTextReq, func(b BHS) error { TextReq{InitiatorSNs{b}}.SetExpStatSN(3); return nil }, func(b BHS) uint64 { return uint64(TextReq{InitiatorSNs{b}}.ExpStatSN()) }, 3, 28, []byte{0, 0, 0, 3}},
		{"TextResp C", OpTextResp, func(b BHS) error { TextResp{TargetSNs{b}}.SetContinue(true); return nil }, func(b BHS) uint64 { return b2u(TextResp{TargetSNs{b}}.Continue()) }, 1, 1, []byte{0xc0}},
		{"TextResp TTT", OpTextResp, func(b BHS) error { TextResp{TargetSNs{b}}.SetTTT(4); return nil }, func(b BHS) uint64 { return uint64(TextResp{TargetSNs{b}}.TTT()) }, 4, 20, []byte{0, 0, 0, 4}},
		{"TextResp ExpCmdSN", OpTextResp, func(b BHS) error { TextResp{TargetSNs{b}}.SetExpCmdSN(5); return nil }, func(b BHS) uint64 { return uint64(TextResp{TargetSNs{b}}.ExpCmdSN()) }, 5, 28, []byte{0, 0, 0, 5}},
		// Logout, 11.14 and 11.15
		{"LogoutReq Reason", OpLogoutReq, func(b BHS) error { return LogoutReq{InitiatorSNs{b}}.SetReasonCode(2) }, func(b BHS) uint64 { return uint64(LogoutReq{InitiatorSNs{b}}.ReasonCode()) }, 2, 1, []byte{0x82}},
		{"LogoutReq CID", OpLogoutReq, func(b BHS) error { LogoutReq{InitiatorSNs{b}}.SetCID(7); return nil }, func(b BHS) uint64 { return uint64(LogoutReq{InitiatorSNs{b}}.CID()) }, 7, 20, []byte{0, 7}},
		{"LogoutResp Response", OpLogoutResp, func(b BHS) error { LogoutResp{TargetSNs{b}}.SetResponse(3); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{TargetSNs{b}}.Response()) }, 3, 2, []byte{3}},
		{"LogoutResp Time2Wait", OpLogoutResp, func(b BHS) error { LogoutResp{TargetSNs{b}}.SetTime2Wait(2); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{TargetSNs{b}}.Time2Wait()) }, 2, 40, []byte{0, 2}},
		{"LogoutResp Time2Retain", OpLogoutResp, func(b BHS) error { LogoutResp{TargetSNs{b}}.SetTime2Retain(20); return nil }, func(b BHS) uint64 { return uint64(LogoutResp{TargetSNs{b}}.Time2Retain()) }, 20, 42, []byte{0, 20}},
		// NOP, 11.18 and 11.19
		{"NOPOut TTT", OpNOPOut, func(b BHS) error { NOPOut{InitiatorSNs{b}}.SetTTT(0x11); return nil }, func(b BHS) uint64 { return uint64(NOPOut{InitiatorSNs{b}}.TTT()) }, 0x11, 20, []byte{0, 0, 0, 0x11}},
		{"NOPOut CmdSN", OpNOPOut, func(b BHS) error { NOPOut{InitiatorSNs{b}}.SetCmdSN(1); return nil }, func(b BHS) uint64 { return uint64(NOPOut{InitiatorSNs{b}}.CmdSN()) }, 1, 24, []byte{0, 0, 0, 1}},
		{"NOPIn TTT", OpNOPIn, func(b BHS) error { NOPIn{TargetSNs{b}}.SetTTT(0x12); return nil }, func(b BHS) uint64 { return uint64(NOPIn{TargetSNs{b}}.TTT()) }, 0x12, 20, []byte{0, 0, 0, 0x12}},
		{"NOPIn MaxCmdSN", OpNOPIn, func(b BHS) error { NOPIn{TargetSNs{b}}.SetMaxCmdSN(64); return nil }, func(b BHS) uint64 { return uint64(NOPIn{TargetSNs{b}}.MaxCmdSN()) }, 64, 32, []byte{0, 0, 0, 64}},
		// Reject, 11.17
		{"Reject Reason", OpReject, func(b BHS) error { Reject{TargetSNs{b}}.SetReason(0x09); return nil }, func(b BHS) uint64 { return uint64(Reject{TargetSNs{b}}.Reason()) }, 9, 2, []byte{9}},
		{"Reject DataSN", OpReject, func(b BHS) error { Reject{TargetSNs{b}}.SetDataSN(3); return nil }, func(b BHS) uint64 { return uint64(Reject{TargetSNs{b}}.DataSN()) }, 3, 36, []byte{0, 0, 0, 3}},
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
