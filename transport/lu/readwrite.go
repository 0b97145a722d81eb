package lu

import (
	"encoding/binary"

	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// rwCDB decodes the LBA and block count of a READ or WRITE CDB (SBC-3
// sections 5.7 to 5.10 and 5.32 to 5.35) and whether it asks for Force Unit
// Access. ok is false when the CDB is too short or sets a field this target
// does not support (RDPROTECT/WRPROTECT).
func rwCDB(cdb []byte) (lba uint64, n uint32, fua, ok bool) {
	need := map6
	switch api.SCSICommandType(cdb[0]) {
	case api.READ_10, api.WRITE_10:
		need = 10
	case api.READ_12, api.WRITE_12:
		need = 12
	case api.READ_16, api.WRITE_16:
		need = 16
	}
	if len(cdb) < need {
		return 0, 0, false, false
	}
	switch need {
	case map6:
		lba = uint64(cdb[1]&0x1f)<<16 | uint64(cdb[2])<<8 | uint64(cdb[3])
		n = uint32(cdb[4])
		if n == 0 {
			n = 256
		}
		return lba, n, false, true
	case 10:
		lba, n = uint64(binary.BigEndian.Uint32(cdb[2:])), uint32(binary.BigEndian.Uint16(cdb[7:]))
	case 12:
		lba, n = uint64(binary.BigEndian.Uint32(cdb[2:])), binary.BigEndian.Uint32(cdb[6:])
	case 16:
		lba, n = binary.BigEndian.Uint64(cdb[2:]), binary.BigEndian.Uint32(cdb[10:])
	}
	if cdb[1]&0xe0 != 0 { // protection information: type 0 only
		return 0, 0, false, false
	}
	return lba, n, cdb[1]&0x08 != 0, true
}

const map6 = 6

// isRead reports whether op is one of the READ commands served from the store.
func isRead(op byte) bool {
	switch api.SCSICommandType(op) {
	case api.READ_6, api.READ_10, api.READ_12, api.READ_16:
		return true
	}
	return false
}

// isWrite reports whether op is one of the plain WRITE commands.
func isWrite(op byte) bool {
	switch api.SCSICommandType(op) {
	case api.WRITE_6, api.WRITE_10, api.WRITE_12, api.WRITE_16:
		return true
	}
	return false
}

// readWrite replaces gotgt's SBCReadWrite for READ and WRITE: READ points
// the data-in buffer at the store's mapping instead of copying, WRITE copies
// exactly the CDB's transfer length (gotgt would write the whole buffer).
func readWrite(_ int, cmd *api.SCSICommand) api.SAMStat {
	b, ok := cmd.Device.Storage.(*backing)
	if !ok {
		return checkCondition(cmd, gscsi.HARDWARE_ERROR, gscsi.ASC_INTERNAL_TGT_FAILURE)
	}
	l := b.lu
	lba, n, fua, ok := rwCDB(cmd.SCB)
	if !ok {
		return checkCondition(cmd, gscsi.ILLEGAL_REQUEST, gscsi.ASC_INVALID_FIELD_IN_CDB)
	}
	blocks := uint64(len(l.data)) >> 9
	if lba > blocks || uint64(n) > blocks-lba {
		return checkCondition(cmd, gscsi.ILLEGAL_REQUEST, gscsi.ASC_LBA_OUT_OF_RANGE)
	}
	off, tl := lba<<9, uint64(n)<<9
	cmd.Offset, cmd.TL = off, uint32(tl)
	if isRead(cmd.SCB[0]) {
		cmd.InSDBBuffer.Buffer = l.data[off : off+tl]
		cmd.InSDBBuffer.Resid = uint32(tl)
		return api.SAMStatGood
	}
	if l.store.ReadOnly() {
		return checkCondition(cmd, gscsi.DATA_PROTECT, gscsi.ASC_WRITE_PROTECT)
	}
	if cmd.OutSDBBuffer == nil || uint64(len(cmd.OutSDBBuffer.Buffer)) < tl {
		// The initiator sends less than the CDB asks to write.
		return checkCondition(cmd, gscsi.ILLEGAL_REQUEST, gscsi.ASC_INVALID_FIELD_IN_CDB)
	}
	copy(l.data[off:off+tl], cmd.OutSDBBuffer.Buffer[:tl])
	if fua {
		if err := l.store.Sync(int64(off), int64(tl)); err != nil {
			return checkCondition(cmd, gscsi.MEDIUM_ERROR, gscsi.ASC_WRITE_ERROR)
		}
	}
	return api.SAMStatGood
}

// checkCondition fails cmd with fixed-format sense data (SPC-4 4.5.3) of
// sense key key and additional sense code asc. gotgt's BuildSenseData would
// truncate it to the CDB's allocation length.
func checkCondition(cmd *api.SCSICommand, key byte, asc gscsi.SCSISubError) api.SAMStat {
	s := make([]byte, 18)
	s[0], s[2], s[7] = 0x70, key, 10
	s[12], s[13] = byte(asc>>8), byte(asc)
	cmd.SenseBuffer = &api.SenseBuffer{Buffer: s, Length: uint32(len(s))}
	cmd.Result = key
	return api.SAMStatCheckCondition
}
