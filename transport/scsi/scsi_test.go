package scsi

import (
	"testing"

	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// TestAgreesWithGotgt checks every value gotgt also defines against
// gotgt's: transport/lu fills gotgt's command table by these opcodes and
// reads gotgt's statuses and sense data with these values.
func TestAgreesWithGotgt(t *testing.T) {
	for _, c := range []struct {
		name        string
		ours, gotgt int
	}{
		{"TestUnitReady", TestUnitReady, int(api.TEST_UNIT_READY)},
		{"RequestSense", RequestSense, int(api.REQUEST_SENSE)},
		{"FormatUnit", FormatUnit, int(api.FORMAT_UNIT)},
		{"Read6", Read6, int(api.READ_6)},
		{"Write6", Write6, int(api.WRITE_6)},
		{"Inquiry", Inquiry, int(api.INQUIRY)},
		{"ModeSelect6", ModeSelect6, int(api.MODE_SELECT)},
		{"Reserve6", Reserve6, int(api.RESERVE)},
		{"Release6", Release6, int(api.RELEASE)},
		{"ModeSense6", ModeSense6, int(api.MODE_SENSE)},
		{"StartStopUnit", StartStopUnit, int(api.START_STOP)},
		{"SendDiagnostic", SendDiagnostic, int(api.SEND_DIAGNOSTIC)},
		{"PreventAllowMediumRemoval", PreventAllowMediumRemoval, int(api.ALLOW_MEDIUM_REMOVAL)},
		{"ReadCapacity10", ReadCapacity10, int(api.READ_CAPACITY)},
		{"Read10", Read10, int(api.READ_10)},
		{"Write10", Write10, int(api.WRITE_10)},
		{"WriteAndVerify10", WriteAndVerify10, int(api.WRITE_VERIFY)},
		{"Verify10", Verify10, int(api.VERIFY_10)},
		{"PreFetch10", PreFetch10, int(api.PRE_FETCH_10)},
		{"SynchronizeCache10", SynchronizeCache10, int(api.SYNCHRONIZE_CACHE)},
		{"WriteSame10", WriteSame10, int(api.WRITE_SAME)},
		{"Unmap", Unmap, int(api.UNMAP)},
		{"ModeSelect10", ModeSelect10, int(api.MODE_SELECT_10)},
		{"Reserve10", Reserve10, int(api.RESERVE_10)},
		{"Release10", Release10, int(api.RELEASE_10)},
		{"ModeSense10", ModeSense10, int(api.MODE_SENSE_10)},
		{"PersistentReserveIn", PersistentReserveIn, int(api.PERSISTENT_RESERVE_IN)},
		{"PersistentReserveOut", PersistentReserveOut, int(api.PERSISTENT_RESERVE_OUT)},
		{"VariableLength", VariableLength, int(api.VARLEN_CDB)},
		{"Read16", Read16, int(api.READ_16)},
		{"CompareAndWrite", CompareAndWrite, int(api.COMPARE_AND_WRITE)},
		{"Write16", Write16, int(api.WRITE_16)},
		{"OrWrite16", OrWrite16, int(api.ORWRITE_16)},
		{"WriteAndVerify16", WriteAndVerify16, int(api.WRITE_VERIFY_16)},
		{"Verify16", Verify16, int(api.VERIFY_16)},
		{"PreFetch16", PreFetch16, int(api.PRE_FETCH_16)},
		{"SynchronizeCache16", SynchronizeCache16, int(api.SYNCHRONIZE_CACHE_16)},
		{"WriteSame16", WriteSame16, int(api.WRITE_SAME_16)},
		{"ServiceActionIn16", ServiceActionIn16, int(api.SERVICE_ACTION_IN)},
		{"ReportLUNs", ReportLUNs, int(api.REPORT_LUNS)},
		{"MaintenanceIn", MaintenanceIn, int(api.MAINT_PROTOCOL_IN)},
		{"Read12", Read12, int(api.READ_12)},
		{"Write12", Write12, int(api.WRITE_12)},
		{"WriteAndVerify12", WriteAndVerify12, int(api.WRITE_VERIFY_12)},
		{"Verify12", Verify12, int(api.VERIFY_12)},

		{"ReadCapacity16", ReadCapacity16, int(api.SAI_READ_CAPACITY_16)},
		{"GetLBAStatus", GetLBAStatus, int(api.SAI_GET_LBA_STATUS)},

		{"StatusGood", StatusGood, int(api.SAM_STAT_GOOD)},
		{"StatusCheckCondition", StatusCheckCondition, int(api.SAM_STAT_CHECK_CONDITION)},
		{"StatusBusy", StatusBusy, int(api.SAM_STAT_BUSY)},
		{"StatusReservationConflict", StatusReservationConflict, int(api.SAM_STAT_RESERVATION_CONFLICT)},
		{"StatusTaskSetFull", StatusTaskSetFull, int(api.SAM_STAT_TASK_SET_FULL)},

		{"SenseMediumError", SenseMediumError, int(gscsi.MEDIUM_ERROR)},
		{"SenseHardwareError", SenseHardwareError, int(gscsi.HARDWARE_ERROR)},
		{"SenseIllegalRequest", SenseIllegalRequest, int(gscsi.ILLEGAL_REQUEST)},
		{"SenseDataProtect", SenseDataProtect, int(gscsi.DATA_PROTECT)},
		{"SenseMiscompare", SenseMiscompare, int(gscsi.MISCOMPARE)},

		{"ASCWriteError", ASCWriteError, int(gscsi.ASC_WRITE_ERROR)},
		{"ASCUnrecoveredReadError", ASCUnrecoveredReadError, int(gscsi.ASC_READ_ERROR)},
		{"ASCParameterListLengthError", ASCParameterListLengthError, int(gscsi.ASC_PARAMETER_LIST_LENGTH_ERR)},
		{"ASCMiscompareDuringVerify", ASCMiscompareDuringVerify, int(gscsi.ASC_MISCOMPARE_DURING_VERIFY_OPERATION)},
		{"ASCInvalidCommandOperationCode", ASCInvalidCommandOperationCode, int(gscsi.ASC_INVALID_OP_CODE)},
		{"ASCLBAOutOfRange", ASCLBAOutOfRange, int(gscsi.ASC_LBA_OUT_OF_RANGE)},
		{"ASCInvalidFieldInCDB", ASCInvalidFieldInCDB, int(gscsi.ASC_INVALID_FIELD_IN_CDB)},
		{"ASCLogicalUnitNotSupported", ASCLogicalUnitNotSupported, int(gscsi.ASC_LUN_NOT_SUPPORTED)},
		{"ASCInvalidFieldInParameterList", ASCInvalidFieldInParameterList, int(gscsi.ASC_INVALID_FIELD_IN_PARMS)},
		{"ASCWriteProtected", ASCWriteProtected, int(gscsi.ASC_WRITE_PROTECT)},
		{"ASCInternalTargetFailure", ASCInternalTargetFailure, int(gscsi.ASC_INTERNAL_TGT_FAILURE)},
	} {
		if c.ours != c.gotgt {
			t.Errorf("%s = %#x, gotgt has %#x", c.name, c.ours, c.gotgt)
		}
	}
}
