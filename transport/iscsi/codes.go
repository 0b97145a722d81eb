package iscsi

// Reject reasons (RFC 7143 section 11.17.1).
const (
	RejectDigestError         uint8 = 0x02
	RejectSNACK               uint8 = 0x03
	RejectProtocolError       uint8 = 0x04
	RejectCommandNotSupported uint8 = 0x05
	RejectImmediateCommand    uint8 = 0x06 // too many immediate commands
	RejectTaskInProgress      uint8 = 0x07
	RejectInvalidDataAck      uint8 = 0x08
	RejectInvalidPDUField     uint8 = 0x09
	RejectOutOfResources      uint8 = 0x0a // long op reject: can't generate a TTT
	RejectWaitingForLogout    uint8 = 0x0c
)

// Task management functions (RFC 7143 section 11.5.1).
const (
	TMFAbortTask       uint8 = 1
	TMFAbortTaskSet    uint8 = 2
	TMFClearACA        uint8 = 3
	TMFClearTaskSet    uint8 = 4
	TMFLUNReset        uint8 = 5
	TMFTargetWarmReset uint8 = 6
	TMFTargetColdReset uint8 = 7
	TMFTaskReassign    uint8 = 8
)

// Task management responses (RFC 7143 section 11.6.1).
const (
	TMFComplete      uint8 = 0
	TMFNoTask        uint8 = 1
	TMFNoLUN         uint8 = 2
	TMFTaskAllegiant uint8 = 3
	TMFNoReassign    uint8 = 4
	TMFNotSupported  uint8 = 5
	TMFAuthFailed    uint8 = 6
	TMFRejected      uint8 = 255
)

// Logout reason codes (section 11.14.1) and responses (section 11.15.1).
const (
	LogoutCloseSession      uint8 = 0
	LogoutCloseConnection   uint8 = 1
	LogoutRemoveForRecovery uint8 = 2

	LogoutOK            uint8 = 0
	LogoutCIDNotFound   uint8 = 1
	LogoutNoRecovery    uint8 = 2
	LogoutCleanupFailed uint8 = 3
)

// SCSI Response "Response" field values (section 11.4.3).
const (
	ResponseCompleted     uint8 = 0x00
	ResponseTargetFailure uint8 = 0x01
)
