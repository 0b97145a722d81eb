// Typed views of the BHS for the PDUs of section 11 (accessors and setters).

package iscsi

import "encoding/binary"

// NOPOut is a view of a BHS whose opcode is OpNOPOut (section 11.18).
type NOPOut struct{ InitiatorSNs }

// AsNOPOut returns b as a NOPOut, or ErrWrongOpcode.
func AsNOPOut(b BHS) (NOPOut, error) {
	if err := b.view(OpNOPOut); err != nil {
		return NOPOut{}, err
	}
	return NOPOut{InitiatorSNs{b}}, nil
}

// NewNOPOut zeroes buf[:BHSLen] and returns it as a NOPOut with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewNOPOut(buf []byte) (NOPOut, error) {
	b, err := initView(buf, OpNOPOut, 0x80)
	if err != nil {
		return NOPOut{}, err
	}
	return NOPOut{InitiatorSNs{b}}, nil
}

// TTT is the Target Transfer Tag (0xffffffff unless answering a NOP-In) (octets 20-23).
func (p NOPOut) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p NOPOut) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// SCSICommand is a view of a BHS whose opcode is OpSCSICommand (section 11.3).
type SCSICommand struct{ InitiatorSNs }

// AsSCSICommand returns b as a SCSICommand, or ErrWrongOpcode.
func AsSCSICommand(b BHS) (SCSICommand, error) {
	if err := b.view(OpSCSICommand); err != nil {
		return SCSICommand{}, err
	}
	return SCSICommand{InitiatorSNs{b}}, nil
}

// NewSCSICommand zeroes buf[:BHSLen] and returns it as a SCSICommand with its opcode, octet 1 zero; fill it with the setters. Errors: ErrShortBuffer.
func NewSCSICommand(buf []byte) (SCSICommand, error) {
	b, err := initView(buf, OpSCSICommand, 0x0)
	if err != nil {
		return SCSICommand{}, err
	}
	return SCSICommand{InitiatorSNs{b}}, nil
}

// Read is the R bit: data will be read from the target (octet 1, mask 0x40).
func (p SCSICommand) Read() bool { return p.BHS[1]&0x40 != 0 }

// SetRead sets octet 1, mask 0x40.
func (p SCSICommand) SetRead(v bool) { setBit(p.BHS, 1, 0x40, v) }

// Write is the W bit: data will be written to the target (octet 1, mask 0x20).
func (p SCSICommand) Write() bool { return p.BHS[1]&0x20 != 0 }

// SetWrite sets octet 1, mask 0x20.
func (p SCSICommand) SetWrite(v bool) { setBit(p.BHS, 1, 0x20, v) }

// Attr is the task attribute (0 untagged, 1 simple, 2 ordered, 3 head of queue, 4 ACA) (octet 1, mask 0x7).
func (p SCSICommand) Attr() uint8 { return p.BHS[1] & 0x7 }

// SetAttr sets octet 1, mask 0x7; ErrRange if v does not fit.
func (p SCSICommand) SetAttr(v uint8) error {
	if v > 0x7 {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0x7 | v<<0
	return nil
}

// ExpectedDataTransferLength is the Expected Data Transfer Length in octets (octets 20-23).
func (p SCSICommand) ExpectedDataTransferLength() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetExpectedDataTransferLength sets octets 20-23.
func (p SCSICommand) SetExpectedDataTransferLength(v uint32) {
	binary.BigEndian.PutUint32(p.BHS[20:], v)
}

// CDB is the 16-octet SCSI Command Descriptor Block (octets 32-47), aliasing the BHS; a longer CDB continues in an AHS.
func (p SCSICommand) CDB() []byte { return p.BHS[32:48:48] }

// SetCDB copies cdb into octets 32-47, zero-padded; ErrRange if longer than 16 octets.
func (p SCSICommand) SetCDB(cdb []byte) error {
	if len(cdb) > 16 {
		return ErrRange
	}
	clear(p.BHS[32+copy(p.BHS[32:48], cdb) : 48])
	return nil
}

// SCSIResponse is a view of a BHS whose opcode is OpSCSIResponse (section 11.4).
type SCSIResponse struct{ TargetSNs }

// AsSCSIResponse returns b as a SCSIResponse, or ErrWrongOpcode.
func AsSCSIResponse(b BHS) (SCSIResponse, error) {
	if err := b.view(OpSCSIResponse); err != nil {
		return SCSIResponse{}, err
	}
	return SCSIResponse{TargetSNs{b}}, nil
}

// NewSCSIResponse zeroes buf[:BHSLen] and returns it as a SCSIResponse with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewSCSIResponse(buf []byte) (SCSIResponse, error) {
	b, err := initView(buf, OpSCSIResponse, 0x80)
	if err != nil {
		return SCSIResponse{}, err
	}
	return SCSIResponse{TargetSNs{b}}, nil
}

// BidiOverflow is the o bit: Bidirectional Read Residual Overflow (octet 1, mask 0x10).
func (p SCSIResponse) BidiOverflow() bool { return p.BHS[1]&0x10 != 0 }

// SetBidiOverflow sets octet 1, mask 0x10.
func (p SCSIResponse) SetBidiOverflow(v bool) { setBit(p.BHS, 1, 0x10, v) }

// BidiUnderflow is the u bit: Bidirectional Read Residual Underflow (octet 1, mask 0x8).
func (p SCSIResponse) BidiUnderflow() bool { return p.BHS[1]&0x8 != 0 }

// SetBidiUnderflow sets octet 1, mask 0x8.
func (p SCSIResponse) SetBidiUnderflow(v bool) { setBit(p.BHS, 1, 0x8, v) }

// Overflow is the O bit: Residual Overflow (octet 1, mask 0x4).
func (p SCSIResponse) Overflow() bool { return p.BHS[1]&0x4 != 0 }

// SetOverflow sets octet 1, mask 0x4.
func (p SCSIResponse) SetOverflow(v bool) { setBit(p.BHS, 1, 0x4, v) }

// Underflow is the U bit: Residual Underflow (octet 1, mask 0x2).
func (p SCSIResponse) Underflow() bool { return p.BHS[1]&0x2 != 0 }

// SetUnderflow sets octet 1, mask 0x2.
func (p SCSIResponse) SetUnderflow(v bool) { setBit(p.BHS, 1, 0x2, v) }

// Response is the iSCSI service response (0x00 Command Completed at Target, 0x01 Target Failure) (octet 2).
func (p SCSIResponse) Response() uint8 { return p.BHS[2] }

// SetResponse sets octet 2.
func (p SCSIResponse) SetResponse(v uint8) { p.BHS[2] = v }

// Status is the SCSI status, valid when Response is 0x00 (octet 3).
func (p SCSIResponse) Status() uint8 { return p.BHS[3] }

// SetStatus sets octet 3.
func (p SCSIResponse) SetStatus(v uint8) { p.BHS[3] = v }

// SNACKTag is the SNACK Tag (octets 20-23).
func (p SCSIResponse) SNACKTag() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetSNACKTag sets octets 20-23.
func (p SCSIResponse) SetSNACKTag(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// ExpDataSN is the number of Data-In PDUs the target sent for the command (octets 36-39).
func (p SCSIResponse) ExpDataSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetExpDataSN sets octets 36-39.
func (p SCSIResponse) SetExpDataSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }

// BidiReadResidualCount is the Bidirectional Read Residual Count (octets 40-43).
func (p SCSIResponse) BidiReadResidualCount() uint32 { return binary.BigEndian.Uint32(p.BHS[40:]) }

// SetBidiReadResidualCount sets octets 40-43.
func (p SCSIResponse) SetBidiReadResidualCount(v uint32) { binary.BigEndian.PutUint32(p.BHS[40:], v) }

// ResidualCount is the Residual Count (octets 44-47).
func (p SCSIResponse) ResidualCount() uint32 { return binary.BigEndian.Uint32(p.BHS[44:]) }

// SetResidualCount sets octets 44-47.
func (p SCSIResponse) SetResidualCount(v uint32) { binary.BigEndian.PutUint32(p.BHS[44:], v) }

// TaskMgmtReq is a view of a BHS whose opcode is OpTaskMgmtReq (section 11.5).
type TaskMgmtReq struct{ InitiatorSNs }

// AsTaskMgmtReq returns b as a TaskMgmtReq, or ErrWrongOpcode.
func AsTaskMgmtReq(b BHS) (TaskMgmtReq, error) {
	if err := b.view(OpTaskMgmtReq); err != nil {
		return TaskMgmtReq{}, err
	}
	return TaskMgmtReq{InitiatorSNs{b}}, nil
}

// NewTaskMgmtReq zeroes buf[:BHSLen] and returns it as a TaskMgmtReq with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewTaskMgmtReq(buf []byte) (TaskMgmtReq, error) {
	b, err := initView(buf, OpTaskMgmtReq, 0x80)
	if err != nil {
		return TaskMgmtReq{}, err
	}
	return TaskMgmtReq{InitiatorSNs{b}}, nil
}

// Function is the task management function (1 ABORT TASK ... 8 TASK REASSIGN) (octet 1, mask 0x7f).
func (p TaskMgmtReq) Function() uint8 { return p.BHS[1] & 0x7f }

// SetFunction sets octet 1, mask 0x7f; ErrRange if v does not fit.
func (p TaskMgmtReq) SetFunction(v uint8) error {
	if v > 0x7f {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0x7f | v<<0
	return nil
}

// ReferencedTaskTag is the ITT of the task to act on (ABORT TASK) (octets 20-23).
func (p TaskMgmtReq) ReferencedTaskTag() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetReferencedTaskTag sets octets 20-23.
func (p TaskMgmtReq) SetReferencedTaskTag(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// RefCmdSN is the CmdSN of the referenced task (octets 32-35).
func (p TaskMgmtReq) RefCmdSN() uint32 { return binary.BigEndian.Uint32(p.BHS[32:]) }

// SetRefCmdSN sets octets 32-35.
func (p TaskMgmtReq) SetRefCmdSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[32:], v) }

// ExpDataSN is the expected DataSN (TASK REASSIGN) (octets 36-39).
func (p TaskMgmtReq) ExpDataSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetExpDataSN sets octets 36-39.
func (p TaskMgmtReq) SetExpDataSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }

// TaskMgmtResp is a view of a BHS whose opcode is OpTaskMgmtResp (section 11.6).
type TaskMgmtResp struct{ TargetSNs }

// AsTaskMgmtResp returns b as a TaskMgmtResp, or ErrWrongOpcode.
func AsTaskMgmtResp(b BHS) (TaskMgmtResp, error) {
	if err := b.view(OpTaskMgmtResp); err != nil {
		return TaskMgmtResp{}, err
	}
	return TaskMgmtResp{TargetSNs{b}}, nil
}

// NewTaskMgmtResp zeroes buf[:BHSLen] and returns it as a TaskMgmtResp with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewTaskMgmtResp(buf []byte) (TaskMgmtResp, error) {
	b, err := initView(buf, OpTaskMgmtResp, 0x80)
	if err != nil {
		return TaskMgmtResp{}, err
	}
	return TaskMgmtResp{TargetSNs{b}}, nil
}

// Response is the function response (0 complete, 1 task does not exist, ..., 255 rejected) (octet 2).
func (p TaskMgmtResp) Response() uint8 { return p.BHS[2] }

// SetResponse sets octet 2.
func (p TaskMgmtResp) SetResponse(v uint8) { p.BHS[2] = v }

// LoginReq is a view of a BHS whose opcode is OpLoginReq (section 11.12).
type LoginReq struct{ InitiatorSNs }

// AsLoginReq returns b as a LoginReq, or ErrWrongOpcode.
func AsLoginReq(b BHS) (LoginReq, error) {
	if err := b.view(OpLoginReq); err != nil {
		return LoginReq{}, err
	}
	return LoginReq{InitiatorSNs{b}}, nil
}

// NewLoginReq zeroes buf[:BHSLen] and returns it as a LoginReq with its opcode, octet 1 zero, the I bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewLoginReq(buf []byte) (LoginReq, error) {
	b, err := initView(buf, OpLoginReq, 0x0)
	if err != nil {
		return LoginReq{}, err
	}
	b[0] |= FlagImmediate // the I bit is always 1 in a Login Request
	return LoginReq{InitiatorSNs{b}}, nil
}

// Transit is the T bit: ready to move to the next stage NSG (octet 1, mask 0x80).
func (p LoginReq) Transit() bool { return p.BHS[1]&0x80 != 0 }

// SetTransit sets octet 1, mask 0x80.
func (p LoginReq) SetTransit(v bool) { setBit(p.BHS, 1, 0x80, v) }

// Continue is the C bit: the text in the data segment continues in the next PDU (octet 1, mask 0x40).
func (p LoginReq) Continue() bool { return p.BHS[1]&0x40 != 0 }

// SetContinue sets octet 1, mask 0x40.
func (p LoginReq) SetContinue(v bool) { setBit(p.BHS, 1, 0x40, v) }

// CSG is the Current Stage (0 security negotiation, 1 operational negotiation, 3 full feature phase) (octet 1, mask 0xc).
func (p LoginReq) CSG() uint8 { return p.BHS[1] & 0xc >> 2 }

// SetCSG sets octet 1, mask 0xc; ErrRange if v does not fit.
func (p LoginReq) SetCSG(v uint8) error {
	if v > 0x3 {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0xc | v<<2
	return nil
}

// NSG is the Next Stage, valid when Transit is set (octet 1, mask 0x3).
func (p LoginReq) NSG() uint8 { return p.BHS[1] & 0x3 }

// SetNSG sets octet 1, mask 0x3; ErrRange if v does not fit.
func (p LoginReq) SetNSG(v uint8) error {
	if v > 0x3 {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0x3 | v<<0
	return nil
}

// ISID is the 6-octet Initiator Session ID as an integer (T, A, B, C, D fields of section 11.12.5) (octets 8-13).
func (p LoginReq) ISID() uint64 {
	return uint64(binary.BigEndian.Uint16(p.BHS[8:]))<<32 | uint64(binary.BigEndian.Uint32(p.BHS[8+2:]))
}

// SetISID sets octets 8-13; ErrRange if v does not fit in 48 bits.
func (p LoginReq) SetISID(v uint64) error {
	if v>>48 != 0 {
		return ErrRange
	}
	binary.BigEndian.PutUint16(p.BHS[8:], uint16(v>>32))
	binary.BigEndian.PutUint32(p.BHS[8+2:], uint32(v))
	return nil
}

// TSIH is the Target Session Identifying Handle (octets 14-15).
func (p LoginReq) TSIH() uint16 { return binary.BigEndian.Uint16(p.BHS[14:]) }

// SetTSIH sets octets 14-15.
func (p LoginReq) SetTSIH(v uint16) { binary.BigEndian.PutUint16(p.BHS[14:], v) }

// VersionMax is the highest iSCSI version supported (0x00) (octet 2).
func (p LoginReq) VersionMax() uint8 { return p.BHS[2] }

// SetVersionMax sets octet 2.
func (p LoginReq) SetVersionMax(v uint8) { p.BHS[2] = v }

// VersionMin is the lowest iSCSI version supported (0x00) (octet 3).
func (p LoginReq) VersionMin() uint8 { return p.BHS[3] }

// SetVersionMin sets octet 3.
func (p LoginReq) SetVersionMin(v uint8) { p.BHS[3] = v }

// CID is the Connection ID (octets 20-21).
func (p LoginReq) CID() uint16 { return binary.BigEndian.Uint16(p.BHS[20:]) }

// SetCID sets octets 20-21.
func (p LoginReq) SetCID(v uint16) { binary.BigEndian.PutUint16(p.BHS[20:], v) }

// LoginResp is a view of a BHS whose opcode is OpLoginResp (section 11.13).
type LoginResp struct{ TargetSNs }

// AsLoginResp returns b as a LoginResp, or ErrWrongOpcode.
func AsLoginResp(b BHS) (LoginResp, error) {
	if err := b.view(OpLoginResp); err != nil {
		return LoginResp{}, err
	}
	return LoginResp{TargetSNs{b}}, nil
}

// NewLoginResp zeroes buf[:BHSLen] and returns it as a LoginResp with its opcode, octet 1 zero; fill it with the setters. Errors: ErrShortBuffer.
func NewLoginResp(buf []byte) (LoginResp, error) {
	b, err := initView(buf, OpLoginResp, 0x0)
	if err != nil {
		return LoginResp{}, err
	}
	return LoginResp{TargetSNs{b}}, nil
}

// Transit is the T bit: ready to move to the next stage NSG (octet 1, mask 0x80).
func (p LoginResp) Transit() bool { return p.BHS[1]&0x80 != 0 }

// SetTransit sets octet 1, mask 0x80.
func (p LoginResp) SetTransit(v bool) { setBit(p.BHS, 1, 0x80, v) }

// Continue is the C bit: the text in the data segment continues in the next PDU (octet 1, mask 0x40).
func (p LoginResp) Continue() bool { return p.BHS[1]&0x40 != 0 }

// SetContinue sets octet 1, mask 0x40.
func (p LoginResp) SetContinue(v bool) { setBit(p.BHS, 1, 0x40, v) }

// CSG is the Current Stage (0 security negotiation, 1 operational negotiation, 3 full feature phase) (octet 1, mask 0xc).
func (p LoginResp) CSG() uint8 { return p.BHS[1] & 0xc >> 2 }

// SetCSG sets octet 1, mask 0xc; ErrRange if v does not fit.
func (p LoginResp) SetCSG(v uint8) error {
	if v > 0x3 {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0xc | v<<2
	return nil
}

// NSG is the Next Stage, valid when Transit is set (octet 1, mask 0x3).
func (p LoginResp) NSG() uint8 { return p.BHS[1] & 0x3 }

// SetNSG sets octet 1, mask 0x3; ErrRange if v does not fit.
func (p LoginResp) SetNSG(v uint8) error {
	if v > 0x3 {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0x3 | v<<0
	return nil
}

// ISID is the 6-octet Initiator Session ID as an integer (T, A, B, C, D fields of section 11.12.5) (octets 8-13).
func (p LoginResp) ISID() uint64 {
	return uint64(binary.BigEndian.Uint16(p.BHS[8:]))<<32 | uint64(binary.BigEndian.Uint32(p.BHS[8+2:]))
}

// SetISID sets octets 8-13; ErrRange if v does not fit in 48 bits.
func (p LoginResp) SetISID(v uint64) error {
	if v>>48 != 0 {
		return ErrRange
	}
	binary.BigEndian.PutUint16(p.BHS[8:], uint16(v>>32))
	binary.BigEndian.PutUint32(p.BHS[8+2:], uint32(v))
	return nil
}

// TSIH is the Target Session Identifying Handle (octets 14-15).
func (p LoginResp) TSIH() uint16 { return binary.BigEndian.Uint16(p.BHS[14:]) }

// SetTSIH sets octets 14-15.
func (p LoginResp) SetTSIH(v uint16) { binary.BigEndian.PutUint16(p.BHS[14:], v) }

// VersionMax is the highest iSCSI version the target supports (octet 2).
func (p LoginResp) VersionMax() uint8 { return p.BHS[2] }

// SetVersionMax sets octet 2.
func (p LoginResp) SetVersionMax(v uint8) { p.BHS[2] = v }

// VersionActive is the version the target chose (octet 3).
func (p LoginResp) VersionActive() uint8 { return p.BHS[3] }

// SetVersionActive sets octet 3.
func (p LoginResp) SetVersionActive(v uint8) { p.BHS[3] = v }

// StatusClass is the Status-Class (0 success, 1 redirection, 2 initiator error, 3 target error) (octet 36).
func (p LoginResp) StatusClass() uint8 { return p.BHS[36] }

// SetStatusClass sets octet 36.
func (p LoginResp) SetStatusClass(v uint8) { p.BHS[36] = v }

// StatusDetail is the Status-Detail (octet 37).
func (p LoginResp) StatusDetail() uint8 { return p.BHS[37] }

// SetStatusDetail sets octet 37.
func (p LoginResp) SetStatusDetail(v uint8) { p.BHS[37] = v }

// TextReq is a view of a BHS whose opcode is OpTextReq (section 11.10).
type TextReq struct{ InitiatorSNs }

// AsTextReq returns b as a TextReq, or ErrWrongOpcode.
func AsTextReq(b BHS) (TextReq, error) {
	if err := b.view(OpTextReq); err != nil {
		return TextReq{}, err
	}
	return TextReq{InitiatorSNs{b}}, nil
}

// NewTextReq zeroes buf[:BHSLen] and returns it as a TextReq with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewTextReq(buf []byte) (TextReq, error) {
	b, err := initView(buf, OpTextReq, 0x80)
	if err != nil {
		return TextReq{}, err
	}
	return TextReq{InitiatorSNs{b}}, nil
}

// Continue is the C bit: the text continues in the next PDU (octet 1, mask 0x40).
func (p TextReq) Continue() bool { return p.BHS[1]&0x40 != 0 }

// SetContinue sets octet 1, mask 0x40.
func (p TextReq) SetContinue(v bool) { setBit(p.BHS, 1, 0x40, v) }

// TTT is the Target Transfer Tag (0xffffffff on a new request) (octets 20-23).
func (p TextReq) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p TextReq) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// TextResp is a view of a BHS whose opcode is OpTextResp (section 11.11).
type TextResp struct{ TargetSNs }

// AsTextResp returns b as a TextResp, or ErrWrongOpcode.
func AsTextResp(b BHS) (TextResp, error) {
	if err := b.view(OpTextResp); err != nil {
		return TextResp{}, err
	}
	return TextResp{TargetSNs{b}}, nil
}

// NewTextResp zeroes buf[:BHSLen] and returns it as a TextResp with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewTextResp(buf []byte) (TextResp, error) {
	b, err := initView(buf, OpTextResp, 0x80)
	if err != nil {
		return TextResp{}, err
	}
	return TextResp{TargetSNs{b}}, nil
}

// Continue is the C bit: the text continues in the next PDU (octet 1, mask 0x40).
func (p TextResp) Continue() bool { return p.BHS[1]&0x40 != 0 }

// SetContinue sets octet 1, mask 0x40.
func (p TextResp) SetContinue(v bool) { setBit(p.BHS, 1, 0x40, v) }

// TTT is the Target Transfer Tag (0xffffffff when the exchange is complete) (octets 20-23).
func (p TextResp) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p TextResp) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// LogoutReq is a view of a BHS whose opcode is OpLogoutReq (section 11.14).
type LogoutReq struct{ InitiatorSNs }

// AsLogoutReq returns b as a LogoutReq, or ErrWrongOpcode.
func AsLogoutReq(b BHS) (LogoutReq, error) {
	if err := b.view(OpLogoutReq); err != nil {
		return LogoutReq{}, err
	}
	return LogoutReq{InitiatorSNs{b}}, nil
}

// NewLogoutReq zeroes buf[:BHSLen] and returns it as a LogoutReq with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewLogoutReq(buf []byte) (LogoutReq, error) {
	b, err := initView(buf, OpLogoutReq, 0x80)
	if err != nil {
		return LogoutReq{}, err
	}
	return LogoutReq{InitiatorSNs{b}}, nil
}

// ReasonCode is the reason (0 close the session, 1 close the connection, 2 remove the connection for recovery) (octet 1, mask 0x7f).
func (p LogoutReq) ReasonCode() uint8 { return p.BHS[1] & 0x7f }

// SetReasonCode sets octet 1, mask 0x7f; ErrRange if v does not fit.
func (p LogoutReq) SetReasonCode(v uint8) error {
	if v > 0x7f {
		return ErrRange
	}
	p.BHS[1] = p.BHS[1]&^0x7f | v<<0
	return nil
}

// CID is the Connection ID to close (reason 1 or 2) (octets 20-21).
func (p LogoutReq) CID() uint16 { return binary.BigEndian.Uint16(p.BHS[20:]) }

// SetCID sets octets 20-21.
func (p LogoutReq) SetCID(v uint16) { binary.BigEndian.PutUint16(p.BHS[20:], v) }

// LogoutResp is a view of a BHS whose opcode is OpLogoutResp (section 11.15).
type LogoutResp struct{ TargetSNs }

// AsLogoutResp returns b as a LogoutResp, or ErrWrongOpcode.
func AsLogoutResp(b BHS) (LogoutResp, error) {
	if err := b.view(OpLogoutResp); err != nil {
		return LogoutResp{}, err
	}
	return LogoutResp{TargetSNs{b}}, nil
}

// NewLogoutResp zeroes buf[:BHSLen] and returns it as a LogoutResp with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewLogoutResp(buf []byte) (LogoutResp, error) {
	b, err := initView(buf, OpLogoutResp, 0x80)
	if err != nil {
		return LogoutResp{}, err
	}
	return LogoutResp{TargetSNs{b}}, nil
}

// Response is the logout response (0 closed successfully, 1 CID not found, 2 recovery not supported, 3 cleanup failed) (octet 2).
func (p LogoutResp) Response() uint8 { return p.BHS[2] }

// SetResponse sets octet 2.
func (p LogoutResp) SetResponse(v uint8) { p.BHS[2] = v }

// Time2Wait is Time2Wait in seconds (octets 40-41).
func (p LogoutResp) Time2Wait() uint16 { return binary.BigEndian.Uint16(p.BHS[40:]) }

// SetTime2Wait sets octets 40-41.
func (p LogoutResp) SetTime2Wait(v uint16) { binary.BigEndian.PutUint16(p.BHS[40:], v) }

// Time2Retain is Time2Retain in seconds (octets 42-43).
func (p LogoutResp) Time2Retain() uint16 { return binary.BigEndian.Uint16(p.BHS[42:]) }

// SetTime2Retain sets octets 42-43.
func (p LogoutResp) SetTime2Retain(v uint16) { binary.BigEndian.PutUint16(p.BHS[42:], v) }

// NOPIn is a view of a BHS whose opcode is OpNOPIn (section 11.19).
type NOPIn struct{ TargetSNs }

// AsNOPIn returns b as a NOPIn, or ErrWrongOpcode.
func AsNOPIn(b BHS) (NOPIn, error) {
	if err := b.view(OpNOPIn); err != nil {
		return NOPIn{}, err
	}
	return NOPIn{TargetSNs{b}}, nil
}

// NewNOPIn zeroes buf[:BHSLen] and returns it as a NOPIn with its opcode, the F bit set; fill it with the setters. Errors: ErrShortBuffer.
func NewNOPIn(buf []byte) (NOPIn, error) {
	b, err := initView(buf, OpNOPIn, 0x80)
	if err != nil {
		return NOPIn{}, err
	}
	return NOPIn{TargetSNs{b}}, nil
}

// TTT is the Target Transfer Tag (0xffffffff unless the target asks for a NOP-Out) (octets 20-23).
func (p NOPIn) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p NOPIn) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// Reject is a view of a BHS whose opcode is OpReject (section 11.17).
type Reject struct{ TargetSNs }

// AsReject returns b as a Reject, or ErrWrongOpcode.
func AsReject(b BHS) (Reject, error) {
	if err := b.view(OpReject); err != nil {
		return Reject{}, err
	}
	return Reject{TargetSNs{b}}, nil
}

// NewReject zeroes buf[:BHSLen] and returns it as a Reject with its opcode, the F bit set, ITT 0xffffffff; fill it with the setters. Errors: ErrShortBuffer.
func NewReject(buf []byte) (Reject, error) {
	b, err := initView(buf, OpReject, 0x80)
	if err != nil {
		return Reject{}, err
	}
	b.SetITT(ReservedITT)
	return Reject{TargetSNs{b}}, nil
}

// Reason is the reject reason (e.g. 0x04 protocol error, 0x05 command not supported, 0x09 invalid PDU field) (octet 2).
func (p Reject) Reason() uint8 { return p.BHS[2] }

// SetReason sets octet 2.
func (p Reject) SetReason(v uint8) { p.BHS[2] = v }

// DataSN is the DataSN/R2TSN, for a rejected SNACK (octets 36-39).
func (p Reject) DataSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetDataSN sets octets 36-39.
func (p Reject) SetDataSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }
