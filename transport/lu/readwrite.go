package lu

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	log "github.com/sirupsen/logrus"
)

// rwCDB decodes the LBA and block count of a READ, WRITE or WRITE AND
// VERIFY CDB (SBC-3 sections 5.7 to 5.10 and 5.32 to 5.35, and the WRITE
// AND VERIFY commands)
// and whether the data must be durable before GOOD: Force Unit Access, or
// WRITE AND VERIFY, whose verification is of the medium. ok is false when
// the CDB is too short or sets a field this target does not support
// (RDPROTECT/WRPROTECT).
func rwCDB(cdb []byte) (lba uint64, n uint32, fua, ok bool) {
	need := map6
	switch cdb[0] {
	case scsi.Read10, scsi.Write10, scsi.WriteAndVerify10:
		need = 10
	case scsi.Read12, scsi.Write12, scsi.WriteAndVerify12:
		need = 12
	case scsi.Read16, scsi.Write16, scsi.WriteAndVerify16:
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
	return lba, n, cdb[1]&0x08 != 0 || isWriteVerify(cdb[0]), true
}

const map6 = 6

// isRead reports whether op is one of the READ commands served from the store.
func isRead(op byte) bool {
	switch op {
	case scsi.Read6, scsi.Read10, scsi.Read12, scsi.Read16:
		return true
	}
	return false
}

// isWrite reports whether op is one of the WRITE or WRITE AND VERIFY
// commands, whose data-out is copied to the store.
func isWrite(op byte) bool {
	switch op {
	case scsi.Write6, scsi.Write10, scsi.Write12, scsi.Write16:
		return true
	}
	return isWriteVerify(op)
}

func isWriteVerify(op byte) bool {
	switch op {
	case scsi.WriteAndVerify10, scsi.WriteAndVerify12, scsi.WriteAndVerify16:
		return true
	}
	return false
}

// changesMedium reports whether op changes the LU's blocks: a failure of
// it is a WRITE ERROR, of anything else an UNRECOVERED READ ERROR.
func changesMedium(op byte) bool {
	switch op {
	case scsi.WriteSame10, scsi.WriteSame16, scsi.Unmap, scsi.CompareAndWrite,
		scsi.SynchronizeCache10, scsi.SynchronizeCache16:
		return true
	}
	return isWrite(op)
}

// readWrite replaces gotgt's SBCReadWrite for READ, WRITE and WRITE AND
// VERIFY: READ points the data-in buffer at the store's mapping instead of
// copying, WRITE copies the CDB's transfer length (gotgt would write the
// whole buffer), or the whole blocks of a shorter data-out, under the
// LU's range lock. WRITE AND VERIFY is a
// WRITE made durable before GOOD: data copied into the page cache is what
// the verification would read back (BYTCHK compares equal by
// construction), and the verification of the medium is the Sync.
func readWrite(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	lba, n, fua, ok := rwCDB(cmd.SCB)
	if !ok {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	if !l.inRange(lba, uint64(n)) {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
	}
	off, tl := lba<<9, uint64(n)<<9
	cmd.Offset, cmd.TL = off, uint32(tl)
	if isRead(cmd.SCB[0]) {
		if l.data == nil {
			return l.readRemote(cmd, off, tl)
		}
		cmd.InSDBBuffer.Buffer = l.data[off : off+tl]
		cmd.InSDBBuffer.Resid = uint32(tl)
		if l.paged {
			// Bring the pages in here, where a fault becomes MEDIUM
			// ERROR, rather than in the RNIC's sender, where it would
			// end the connection.
			prefault(cmd.InSDBBuffer.Buffer)
		}
		return api.SAMStatGood
	}
	if l.store.ReadOnly() {
		return checkCondition(cmd, scsi.SenseDataProtect, scsi.ASCWriteProtected)
	}
	if tl == 0 {
		// SBC-3 5.32 to 5.35 and the WRITE AND VERIFY commands: a
		// TRANSFER LENGTH of 0 transfers (and verifies) nothing and is
		// not an error. WRITE(6) never gets here: its 0 means 256 blocks.
		return api.SAMStatGood
	}
	var out []byte
	if cmd.OutSDBBuffer != nil {
		out = cmd.OutSDBBuffer.Buffer
	}
	if uint64(len(out)) < tl {
		// The initiator sent less than the CDB asks to write (iSCSI's
		// Expected Data Transfer Length is below the TRANSFER LENGTH).
		// As LIO, and as libiscsi's iSCSIResiduals tests expect: the
		// whole blocks it sent are written and GOOD answered (nothing,
		// for no data-out), and the transport reports the rest as a
		// residual overflow (Task.DataOutLength). A data-out that ends
		// inside a block cannot be written as sent: INVALID FIELD IN
		// COMMAND INFORMATION UNIT, one of the answers libiscsi takes.
		// More than the CDB asks is ignored past tl (residual underflow).
		if len(out)%512 != 0 {
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCommandIU)
		}
		n, tl = uint32(len(out)>>9), uint64(len(out))
		if n == 0 {
			return api.SAMStatGood
		}
	}
	if err := l.writeLocked(lba, uint64(n), out[:tl]); err != nil {
		log.WithField("lu", l.id).Errorf("lu: %v", err)
		return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
	}
	if fua {
		return l.sync(cmd, off, tl)
	}
	return api.SAMStatGood
}

// readRemote reads a READ's data from a store not in memory into the
// command's data-in buffer, as much of [off, off+tl) as the buffer holds
// (the transport reports the rest as a residual overflow).
func (l *LU) readRemote(cmd *api.SCSICommand, off, tl uint64) api.SAMStat {
	in := cmd.InSDBBuffer.Buffer
	in = in[:min(uint64(len(in)), tl)]
	if err := l.store.ReadAt(in, int64(off)); err != nil {
		log.WithField("lu", l.id).Errorf("lu: %v", err)
		return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCUnrecoveredReadError)
	}
	cmd.InSDBBuffer.Resid = uint32(len(in))
	return api.SAMStatGood
}

// faultSink keeps prefault's loads from being optimised away.
var faultSink atomic.Uint32

// prefault reads one octet of every page of b.
func prefault(b []byte) {
	var x byte
	for i := 0; i < len(b); i += 4096 {
		x ^= b[i]
	}
	if len(b) > 0 {
		x ^= b[len(b)-1]
	}
	faultSink.Store(uint32(x))
}

// writeLocked writes p to blocks [lba, lba+n) through the store (pwrite
// for a file or device: no page fault per page of the mapping) under the
// range lock. The deferred unlock also runs should the store fault.
func (l *LU) writeLocked(lba, n uint64, p []byte) error {
	set := stripes(lba, n)
	l.lock.lock(set)
	defer l.lock.unlock(set)
	return l.store.WriteAt(p[:min(uint64(len(p)), n<<9)], int64(lba<<9))
}

// sync makes octets [off, off+n) durable, or fails cmd with MEDIUM ERROR,
// WRITE ERROR.
func (l *LU) sync(cmd *api.SCSICommand, off, n uint64) api.SAMStat {
	if err := l.store.Sync(int64(off), int64(n)); err != nil {
		log.WithField("lu", l.id).Errorf("lu: %v", err)
		return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
	}
	return api.SAMStatGood
}

// checkCondition fails cmd with fixed-format sense data (SPC-4 4.5.3) of
// sense key key and additional sense code asc. gotgt's BuildSenseData would
// truncate it to the CDB's allocation length.
func checkCondition(cmd *api.SCSICommand, key byte, asc uint16) api.SAMStat {
	s := make([]byte, 18)
	s[0], s[2], s[7] = scsi.SenseFixedCurrent, key, 10
	s[12], s[13] = byte(asc>>8), byte(asc)
	cmd.SenseBuffer = &api.SenseBuffer{Buffer: s, Length: uint32(len(s))}
	cmd.Result = key
	return api.SAMStatCheckCondition
}

// checkConditionInfo is checkCondition with the INFORMATION field set (and
// VALID, SPC-4 4.5.3): COMPARE AND WRITE's offset of the first miscompare.
func checkConditionInfo(cmd *api.SCSICommand, key byte, asc uint16, info uint32) api.SAMStat {
	stat := checkCondition(cmd, key, asc)
	s := cmd.SenseBuffer.Buffer
	s[0] |= 0x80
	binary.BigEndian.PutUint32(s[3:], info)
	return stat
}
