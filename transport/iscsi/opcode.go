package iscsi

import "strconv"

// Opcode is the 6-bit opcode of octet 0 of the BHS (section 11.2.1.2).
type Opcode uint8

// Initiator opcodes (section 11.2.1.2).
const (
	OpNOPOut       Opcode = 0x00
	OpSCSICommand  Opcode = 0x01
	OpTaskMgmtReq  Opcode = 0x02
	OpLoginReq     Opcode = 0x03
	OpTextReq      Opcode = 0x04
	OpSCSIDataOut  Opcode = 0x05
	OpLogoutReq    Opcode = 0x06
	OpSNACKReq     Opcode = 0x10
	OpVendorInit1  Opcode = 0x1c // 0x1c-0x1e: vendor-specific
	OpVendorInit3  Opcode = 0x1e
	OpNOPIn        Opcode = 0x20 // target opcodes from here
	OpSCSIResponse Opcode = 0x21
	OpTaskMgmtResp Opcode = 0x22
	OpLoginResp    Opcode = 0x23
	OpTextResp     Opcode = 0x24
	OpSCSIDataIn   Opcode = 0x25
	OpLogoutResp   Opcode = 0x26
	OpR2T          Opcode = 0x31
	OpAsyncMsg     Opcode = 0x32
	OpVendorTgt1   Opcode = 0x3c // 0x3c-0x3e: vendor-specific
	OpVendorTgt3   Opcode = 0x3e
	OpReject       Opcode = 0x3f
)

var opNames = [64]string{
	OpNOPOut:       "NOP-Out",
	OpSCSICommand:  "SCSI Command",
	OpTaskMgmtReq:  "SCSI Task Management Function Request",
	OpLoginReq:     "Login Request",
	OpTextReq:      "Text Request",
	OpSCSIDataOut:  "SCSI Data-Out",
	OpLogoutReq:    "Logout Request",
	OpSNACKReq:     "SNACK Request",
	0x1c:           "vendor-specific initiator opcode 0x1c",
	0x1d:           "vendor-specific initiator opcode 0x1d",
	0x1e:           "vendor-specific initiator opcode 0x1e",
	OpNOPIn:        "NOP-In",
	OpSCSIResponse: "SCSI Response",
	OpTaskMgmtResp: "SCSI Task Management Function Response",
	OpLoginResp:    "Login Response",
	OpTextResp:     "Text Response",
	OpSCSIDataIn:   "SCSI Data-In",
	OpLogoutResp:   "Logout Response",
	OpR2T:          "Ready To Transfer (R2T)",
	OpAsyncMsg:     "Asynchronous Message",
	0x3c:           "vendor-specific target opcode 0x3c",
	0x3d:           "vendor-specific target opcode 0x3d",
	0x3e:           "vendor-specific target opcode 0x3e",
	OpReject:       "Reject",
}

// Valid reports whether op is defined (or vendor-specific) in section
// 11.2.1.2.
func (op Opcode) Valid() bool { return op < 64 && opNames[op] != "" }

// Target reports whether op is a target opcode (0x20 and above).
func (op Opcode) Target() bool { return op&0x20 != 0 }

func (op Opcode) String() string {
	if op.Valid() {
		return opNames[op]
	}
	return "iSCSI opcode 0x" + strconv.FormatUint(uint64(op), 16)
}
