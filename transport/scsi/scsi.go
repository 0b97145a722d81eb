// Package scsi names the SCSI values both ends of the transport use: the
// operation codes and service actions (SPC-4, SBC-3), the status codes
// (SAM-5), the sense keys and the additional sense codes (SPC-4).
// transport/lu and transport/target on the target side and hostdev/remote
// on the initiator host take them from here, so each value is written down
// once.
//
// The constants are untyped: a CDB is a []byte, a status a byte, and
// gotgt's command table (api.SCSICommandType) takes them as they are. An
// additional sense code is ASC<<8 | ASCQ, as in fixed-format sense data
// octets 12 and 13.
//
// The package has no dependencies; gotgt's api and scsi packages define
// most of these values too, but as variables, and its scsi package is the
// target's SCSI engine, which the initiator host has no use for. The
// tests check that the values agree with gotgt's.
package scsi

// Operation codes (SPC-4, SBC-3), in the order of their values.
const (
	TestUnitReady             = 0x00 // TEST UNIT READY
	RequestSense              = 0x03 // REQUEST SENSE
	FormatUnit                = 0x04 // FORMAT UNIT
	Read6                     = 0x08 // READ(6)
	Write6                    = 0x0a // WRITE(6)
	Inquiry                   = 0x12 // INQUIRY
	ModeSelect6               = 0x15 // MODE SELECT(6)
	Reserve6                  = 0x16 // RESERVE(6) (SPC-2)
	Release6                  = 0x17 // RELEASE(6) (SPC-2)
	ModeSense6                = 0x1a // MODE SENSE(6)
	StartStopUnit             = 0x1b // START STOP UNIT
	SendDiagnostic            = 0x1d // SEND DIAGNOSTIC
	PreventAllowMediumRemoval = 0x1e // PREVENT ALLOW MEDIUM REMOVAL
	ReadCapacity10            = 0x25 // READ CAPACITY(10)
	Read10                    = 0x28 // READ(10)
	Write10                   = 0x2a // WRITE(10)
	WriteAndVerify10          = 0x2e // WRITE AND VERIFY(10)
	Verify10                  = 0x2f // VERIFY(10)
	PreFetch10                = 0x34 // PRE-FETCH(10)
	SynchronizeCache10        = 0x35 // SYNCHRONIZE CACHE(10)
	WriteSame10               = 0x41 // WRITE SAME(10)
	Unmap                     = 0x42 // UNMAP
	ModeSelect10              = 0x55 // MODE SELECT(10)
	Reserve10                 = 0x56 // RESERVE(10) (SPC-2)
	Release10                 = 0x57 // RELEASE(10) (SPC-2)
	ModeSense10               = 0x5a // MODE SENSE(10)
	PersistentReserveIn       = 0x5e // PERSISTENT RESERVE IN
	PersistentReserveOut      = 0x5f // PERSISTENT RESERVE OUT
	VariableLength            = 0x7f // variable length CDBs
	Read16                    = 0x88 // READ(16)
	CompareAndWrite           = 0x89 // COMPARE AND WRITE
	Write16                   = 0x8a // WRITE(16)
	OrWrite16                 = 0x8b // ORWRITE(16)
	WriteAndVerify16          = 0x8e // WRITE AND VERIFY(16)
	Verify16                  = 0x8f // VERIFY(16)
	PreFetch16                = 0x90 // PRE-FETCH(16)
	SynchronizeCache16        = 0x91 // SYNCHRONIZE CACHE(16)
	WriteSame16               = 0x93 // WRITE SAME(16)
	ServiceActionIn16         = 0x9e // SERVICE ACTION IN(16)
	ReportLUNs                = 0xa0 // REPORT LUNS
	MaintenanceIn             = 0xa3 // MAINTENANCE IN
	MaintenanceOut            = 0xa4 // MAINTENANCE OUT
	Read12                    = 0xa8 // READ(12)
	Write12                   = 0xaa // WRITE(12)
	WriteAndVerify12          = 0xae // WRITE AND VERIFY(12)
	Verify12                  = 0xaf // VERIFY(12)
)

// Service actions, in the SERVICE ACTION field (CDB octet 1, bits 4-0).
const (
	ReadCapacity16                = 0x10 // READ CAPACITY(16), of SERVICE ACTION IN(16)
	GetLBAStatus                  = 0x12 // GET LBA STATUS, of SERVICE ACTION IN(16)
	ReportSupportedOperationCodes = 0x0c // REPORT SUPPORTED OPERATION CODES, of MAINTENANCE IN
)

// Status codes (SAM-5).
const (
	StatusGood                = 0x00 // GOOD
	StatusCheckCondition      = 0x02 // CHECK CONDITION
	StatusBusy                = 0x08 // BUSY
	StatusReservationConflict = 0x18 // RESERVATION CONFLICT
	StatusTaskSetFull         = 0x28 // TASK SET FULL
)

// Sense data response codes (SPC-4 4.5.1): fixed format and descriptor
// format, current and deferred.
const (
	SenseFixedCurrent       = 0x70
	SenseFixedDeferred      = 0x71
	SenseDescriptorCurrent  = 0x72
	SenseDescriptorDeferred = 0x73
)

// Sense keys (SPC-4), in the low four bits of sense data octet 2.
const (
	SenseNotReady       = 0x02 // NOT READY
	SenseMediumError    = 0x03 // MEDIUM ERROR
	SenseHardwareError  = 0x04 // HARDWARE ERROR
	SenseIllegalRequest = 0x05 // ILLEGAL REQUEST
	SenseUnitAttention  = 0x06 // UNIT ATTENTION
	SenseDataProtect    = 0x07 // DATA PROTECT
	SenseMiscompare     = 0x0e // MISCOMPARE
)

// Additional sense codes and qualifiers (SPC-4), ASC<<8 | ASCQ.
const (
	ASCWriteError                  = 0x0c00 // WRITE ERROR
	ASCInvalidFieldInCommandIU     = 0x0e03 // INVALID FIELD IN COMMAND INFORMATION UNIT
	ASCUnrecoveredReadError        = 0x1100 // UNRECOVERED READ ERROR
	ASCParameterListLengthError    = 0x1a00 // PARAMETER LIST LENGTH ERROR
	ASCMiscompareDuringVerify      = 0x1d00 // MISCOMPARE DURING VERIFY OPERATION
	ASCInvalidCommandOperationCode = 0x2000 // INVALID COMMAND OPERATION CODE
	ASCLBAOutOfRange               = 0x2100 // LOGICAL BLOCK ADDRESS OUT OF RANGE
	ASCInvalidFieldInCDB           = 0x2400 // INVALID FIELD IN CDB
	ASCLogicalUnitNotSupported     = 0x2500 // LOGICAL UNIT NOT SUPPORTED
	ASCInvalidFieldInParameterList = 0x2600 // INVALID FIELD IN PARAMETER LIST
	ASCWriteProtected              = 0x2700 // WRITE PROTECTED
	ASCPowerOnReset                = 0x2900 // POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (any ASCQ)
	ASCInternalTargetFailure       = 0x4400 // INTERNAL TARGET FAILURE
)
