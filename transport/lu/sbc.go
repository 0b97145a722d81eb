package lu

import (
	"bytes"
	"encoding/binary"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	log "github.com/sirupsen/logrus"
)

// The limits the Block Limits VPD page (0xB0) reports and the commands
// enforce.
const (
	// maxWriteSame is the MAXIMUM WRITE SAME LENGTH in blocks (32 MiB): a
	// WRITE SAME is one copy in the connection's goroutine, so it is kept
	// to about the time of a large WRITE.
	maxWriteSame = 1 << 16
	// maxUnmapBlocks is the MAXIMUM UNMAP LBA COUNT of one UNMAP (512
	// MiB). Punching holes costs little per block, but libiscsi's
	// Inquiry.BlockLimits takes a limit above 1 Mi blocks for insane (a
	// limit is either "no limit", FFFFFFFFh, or at most that), and an
	// initiator splits a larger discard into UNMAPs of this size anyway.
	maxUnmapBlocks = 1 << 20
	// maxUnmapDescriptors is the MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT.
	maxUnmapDescriptors = 256
	// maxCompareAndWrite is the MAXIMUM COMPARE AND WRITE LENGTH in blocks.
	maxCompareAndWrite = 64
)

// luOf returns the LU a gotgt command runs on, or nil for the stand-in LUN
// 0 of a target without one.
func luOf(cmd *api.SCSICommand) *LU {
	if cmd.Device == nil {
		return nil
	}
	if b, ok := cmd.Device.Storage.(*backing); ok {
		return b.lu
	}
	return nil
}

// blocks returns the LU's capacity in logical blocks.
func (l *LU) blocks() uint64 { return uint64(l.store.Size()) >> 9 }

// inRange reports whether blocks [lba, lba+n) lie inside the LU.
func (l *LU) inRange(lba, n uint64) bool {
	b := l.blocks()
	return lba <= b && n <= b-lba
}

// writeSame implements WRITE SAME(10) and WRITE SAME(16) (SBC-3; gotgt
// answers GOOD and writes nothing). The one-block data-out is
// replicated over the range, or zeros with NDOB (WRITE SAME(16) only). With
// the UNMAP bit on a thin LU the range is discarded instead when the block
// is all zeros, which is what a discarded block reads (LBPRZ); a block of
// other data is written, since unmapping it would lose it (SBC-3's WRITE
// SAME and logical block provisioning, from memory). On a LU that is not thin the UNMAP bit is ignored and the
// data written, as SBC-3 allows a device server that cannot unmap.
// ANCHOR is refused (ANC_SUP is 0), as are the obsolete LBDATA and PBDATA,
// protection information, a NUMBER OF LOGICAL BLOCKS of 0 (WSNZ is 1)
// or above maxWriteSame, and a data-out other than one block (without
// NDOB). WRITE SAME has no FUA bit.
func writeSame(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	var lba, n uint64
	ndob := false
	if scb[0] == scsi.WriteSame10 {
		lba, n = uint64(binary.BigEndian.Uint32(scb[2:])), uint64(binary.BigEndian.Uint16(scb[7:]))
	} else {
		lba, n = binary.BigEndian.Uint64(scb[2:]), uint64(binary.BigEndian.Uint32(scb[10:]))
		ndob = scb[1]&0x01 != 0
	}
	unmap := scb[1]&0x08 != 0
	if scb[1]&0xe0 != 0 || scb[1]&0x10 != 0 || scb[1]&0x06 != 0 || n == 0 || n > maxWriteSame {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	if l.store.ReadOnly() {
		return checkCondition(cmd, scsi.SenseDataProtect, scsi.ASCWriteProtected)
	}
	if !l.inRange(lba, n) {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
	}
	var block []byte // nil: zeros
	if !ndob {
		// The data-out is one logical block (SBC-3 5.42, 5.43). One of
		// another length means the initiator and the LU disagree about
		// the command; with UNMAP a longer one would be half ignored. It
		// is refused as COMPARE AND WRITE's is, and as LIO refuses it.
		if cmd.OutSDBBuffer == nil || len(cmd.OutSDBBuffer.Buffer) != 512 {
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
		}
		if block = cmd.OutSDBBuffer.Buffer; allZero(block) {
			block = nil
		}
	}
	off, tl := lba<<9, n<<9
	set := stripes(lba, n)
	l.lock.lockDrained(set)
	defer l.lock.unlock(set)
	if unmap && block == nil && l.Thin() {
		l.unpopulated(int64(off), int64(tl))
		if err := l.store.Discard(int64(off), int64(tl)); err != nil {
			log.WithField("lu", l.id).Errorf("lu: WRITE SAME with UNMAP: %v", err)
			return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
		}
		return api.SAMStatGood
	}
	if l.data == nil {
		if err := l.writeSameRemote(off, tl, block); err != nil {
			log.WithField("lu", l.id).Errorf("lu: WRITE SAME: %v", err)
			return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
		}
		return api.SAMStatGood
	}
	dst := l.data[off : off+tl]
	if block == nil {
		clear(dst)
		return api.SAMStatGood
	}
	copy(dst, block)
	for k := 512; k < len(dst); k *= 2 {
		copy(dst[k:], dst[:k])
	}
	return api.SAMStatGood
}

// writeSameRemote writes block (zeros when nil) over [off, off+n) of a
// store not in memory, through WriteAt in pieces of at most writeSameChunk.
func (l *LU) writeSameRemote(off, n uint64, block []byte) error {
	buf := make([]byte, min(n, writeSameChunk))
	if block != nil {
		copy(buf, block)
		for k := 512; k < len(buf); k *= 2 {
			copy(buf[k:], buf[:k])
		}
	}
	for n > 0 {
		k := min(n, uint64(len(buf)))
		if err := l.store.WriteAt(buf[:k], int64(off)); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// writeSameChunk is the most WRITE SAME writes to a remote store at once.
const writeSameChunk = 1 << 20

// unmap implements UNMAP (SBC-3; gotgt's is a no-op on our stores):
// every block descriptor of the parameter list is checked before any is
// discarded. A LU that is not thin does not support the command (LBPU is
// 0). An incomplete last descriptor is ignored; a PARAMETER LIST LENGTH of
// 0 is no error; one of 1 to 7 is a PARAMETER LIST LENGTH ERROR; more
// descriptors or blocks than Block Limits reports are INVALID FIELD IN
// PARAMETER LIST.
func unmap(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	switch {
	case l.store.ReadOnly():
		return checkCondition(cmd, scsi.SenseDataProtect, scsi.ASCWriteProtected)
	case !l.Thin():
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidCommandOperationCode)
	case scb[1]&0x01 != 0: // ANCHOR
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	pll := int(binary.BigEndian.Uint16(scb[7:]))
	if pll == 0 {
		return api.SAMStatGood
	}
	var p []byte
	if cmd.OutSDBBuffer != nil {
		p = cmd.OutSDBBuffer.Buffer[:min(pll, len(cmd.OutSDBBuffer.Buffer))]
	}
	if len(p) < 8 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCParameterListLengthError)
	}
	d := p[8:]
	d = d[:min(int(binary.BigEndian.Uint16(p[2:])), len(d))/16*16]
	if len(d)/16 > maxUnmapDescriptors {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInParameterList)
	}
	var total, set uint64
	for i := 0; i < len(d); i += 16 {
		lba, n := binary.BigEndian.Uint64(d[i:]), uint64(binary.BigEndian.Uint32(d[i+8:]))
		if !l.inRange(lba, n) {
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
		}
		total += n
		set |= stripes(lba, n)
	}
	if total > maxUnmapBlocks {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInParameterList)
	}
	l.lock.lockDrained(set)
	defer l.lock.unlock(set)
	for i := 0; i < len(d); i += 16 {
		lba, n := binary.BigEndian.Uint64(d[i:]), uint64(binary.BigEndian.Uint32(d[i+8:]))
		if n == 0 {
			continue
		}
		l.unpopulated(int64(lba<<9), int64(n<<9))
		if err := l.store.Discard(int64(lba<<9), int64(n<<9)); err != nil {
			log.WithField("lu", l.id).Errorf("lu: UNMAP: %v", err)
			return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
		}
	}
	return api.SAMStatGood
}

// syncCache implements SYNCHRONIZE CACHE(10) and (16) (SBC-3): Store.Sync of exactly the blocks named, NUMBER OF LOGICAL BLOCKS
// 0 meaning through the last. gotgt ignores the range. IMMED is honoured by
// finishing before the status, which is always allowed.
func syncCache(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	var lba, n uint64
	if scb[0] == scsi.SynchronizeCache10 {
		lba, n = uint64(binary.BigEndian.Uint32(scb[2:])), uint64(binary.BigEndian.Uint16(scb[7:]))
	} else {
		lba, n = binary.BigEndian.Uint64(scb[2:]), uint64(binary.BigEndian.Uint32(scb[10:]))
	}
	if lba >= l.blocks() || !l.inRange(lba, n) {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
	}
	if n == 0 {
		n = l.blocks() - lba
	}
	return l.sync(cmd, lba<<9, n<<9)
}

// compareAndWrite implements COMPARE AND WRITE (SBC-3 5.2), which gotgt
// lacks. The data-out holds NUMBER OF LOGICAL BLOCKS blocks of verify data,
// then as many of write data. Under the range lock, so atomically against
// every other command that changes those blocks, the blocks are compared
// with the verify data and, if equal, replaced with the write data (made
// durable first with FUA); if not, the command ends in MISCOMPARE DURING
// VERIFY OPERATION with the INFORMATION field the offset of the first
// octet that differs. 0 blocks with no data-out is no error and does
// nothing. A data-out
// of another size than twice NUMBER OF LOGICAL BLOCKS blocks (0 blocks
// included) is ILLEGAL REQUEST, INVALID FIELD IN CDB.
func compareAndWrite(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	lba, n := binary.BigEndian.Uint64(scb[2:]), uint64(scb[13])
	fua := scb[1]&0x08 != 0
	if scb[1]&0xe0 != 0 || n > maxCompareAndWrite {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	if l.store.ReadOnly() {
		return checkCondition(cmd, scsi.SenseDataProtect, scsi.ASCWriteProtected)
	}
	if !l.inRange(lba, n) {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
	}
	off, tl := lba<<9, n<<9
	var out []byte
	if cmd.OutSDBBuffer != nil {
		out = cmd.OutSDBBuffer.Buffer
	}
	if uint64(len(out)) != 2*tl {
		// The data-out is exactly the verify and the write data (SBC-3
		// 5.2). One of another size is the initiator's mistake, not a
		// miscompare: ILLEGAL REQUEST, as libiscsi
		// (test_compareandwrite_invalid_dataout_size) and LIO have it.
		// This holds for 0 blocks too: a data-out with them is what an
		// initiator sends that meant 256 blocks or more, which the
		// one-octet NUMBER OF LOGICAL BLOCKS wraps to 0 (libiscsi's
		// CompareAndWrite.Simple and .Miscompare at 256 blocks).
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	if n == 0 {
		return api.SAMStatGood
	}
	verify, write := cmd.OutSDBBuffer.Buffer[:tl], cmd.OutSDBBuffer.Buffer[tl:2*tl]
	at, err := l.compareAndSwap(lba, n, verify, write)
	if err != nil {
		log.WithField("lu", l.id).Errorf("lu: COMPARE AND WRITE: %v", err)
		if at == -2 {
			return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCUnrecoveredReadError)
		}
		return checkCondition(cmd, scsi.SenseMediumError, scsi.ASCWriteError)
	}
	if at >= 0 {
		return checkConditionInfo(cmd, scsi.SenseMiscompare, scsi.ASCMiscompareDuringVerify, uint32(at))
	}
	if fua {
		return l.sync(cmd, off, tl)
	}
	return api.SAMStatGood
}

// compareAndSwap replaces blocks [lba, lba+n) with write if they hold
// verify, under the range lock, and returns -1; otherwise it returns the
// offset of the first octet that differs. An error of a remote store's
// read comes with -2, of its write with -1.
func (l *LU) compareAndSwap(lba, n uint64, verify, write []byte) (int, error) {
	set := stripes(lba, n)
	l.lock.lockDrained(set)
	defer l.lock.unlock(set)
	if l.data == nil {
		// Atomic against this process's commands only (the range lock);
		// see docs/scale-out.md for a remote store shared by gateways.
		cur := make([]byte, n<<9)
		if err := l.store.ReadAt(cur, int64(lba<<9)); err != nil {
			return -2, err
		}
		if !bytes.Equal(cur, verify) {
			return firstDifference(cur, verify), nil
		}
		return -1, l.store.WriteAt(write, int64(lba<<9))
	}
	cur := l.data[lba<<9 : (lba+n)<<9]
	if !bytes.Equal(cur, verify) {
		return firstDifference(cur, verify), nil
	}
	copy(cur, write)
	return -1, nil
}

// firstDifference returns the index of the first octet where a and b,
// of equal length, differ, or -1.
func firstDifference(a, b []byte) int {
	const chunk = 64
	i := 0
	for ; i+chunk <= len(a) && bytes.Equal(a[i:i+chunk], b[i:i+chunk]); i += chunk {
	}
	for ; i < len(a); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	var zeros [512]byte
	for len(b) > 0 {
		k := min(len(b), len(zeros))
		if !bytes.Equal(b[:k], zeros[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// serviceActionIn dispatches SERVICE ACTION IN(16): READ CAPACITY(16) and
// GET LBA STATUS are ours; gotgt answers GOOD to any other service
// action, we INVALID FIELD IN CDB, as for any unsupported field value.
func serviceActionIn(_ int, cmd *api.SCSICommand) api.SAMStat {
	switch cmd.SCB[1] & 0x1f {
	case scsi.ReadCapacity16:
		return readCapacity16(cmd)
	case scsi.GetLBAStatus:
		return getLBAStatus(cmd)
	}
	return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
}

// getLBAStatus implements GET LBA STATUS (SBC-3, the command of logical
// block provisioning; gotgt answers GOOD with no data whatever the LBA). A
// STARTING LOGICAL BLOCK ADDRESS past the last LBA is CHECK CONDITION,
// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE. Otherwise the
// parameter data is one LBA status descriptor that starts at that LBA
// (SBC-3: the first descriptor contains the starting LBA; starting at it
// satisfies SBC-3 and what libiscsi checks) and runs to the end of the LU,
// or as far as its 32-bit NUMBER OF LOGICAL BLOCKS reaches, with
// PROVISIONING STATUS 0h, "mapped or unknown": a Store does not say
// which of its blocks are allocated, so none is reported deallocated.
// That is true of a LU that is not thin and allowed for a thin one.
func getLBAStatus(cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	lba := binary.BigEndian.Uint64(scb[2:])
	if lba >= l.blocks() {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCLBAOutOfRange)
	}
	var d [8 + 16]byte
	binary.BigEndian.PutUint32(d[0:], uint32(len(d)-4)) // PARAMETER DATA LENGTH
	binary.BigEndian.PutUint64(d[8:], lba)
	binary.BigEndian.PutUint32(d[16:], uint32(min(l.blocks()-lba, 0xffffffff)))
	// d[20]: PROVISIONING STATUS 0h
	alloc := int(binary.BigEndian.Uint32(scb[10:]))
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], d[:]))
	return api.SAMStatGood
}

// readCapacity16 implements READ CAPACITY(16) (SBC-3 5.16): the last LBA,
// the block length, LBPME and LBPRZ from the store's Thin, like the VPD
// pages B0 and B2, and LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT 0: one
// logical block per physical block.
//
// The stores are byte-addressed mappings: any one 512-octet block is
// read, written and discarded alone (Discard of one block zeroes exactly
// it, in every store), so no block shares a unit of atomicity or
// of provisioning with another, which is what a physical block of several
// would say. We used to report 8 (4 KiB pages), which made libiscsi's
// GetLBAStatus.UnmapSingle inconsistent: it unmaps blocks [0, i) and asks
// the status of LBA i+1 expecting a descriptor that starts at i +
// 2^LBPPBE, while SBC-3 has the first descriptor contain the starting
// LBA. That the page cache works in pages is a matter of speed, not of
// the medium, and is said where SBC-3 puts such hints: OPTIMAL TRANSFER
// LENGTH GRANULARITY and OPTIMAL UNMAP GRANULARITY in the Block Limits
// page, one page each (Linux takes the first for io_min, as it took the
// physical block size before).
func readCapacity16(cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	// PMI 0 with a LOGICAL BLOCK ADDRESS (SBC-3; both obsolete in SBC-4).
	if scb[14]&0x01 == 0 && binary.BigEndian.Uint64(scb[2:]) != 0 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	var d [32]byte
	binary.BigEndian.PutUint64(d[0:], l.blocks()-1)
	binary.BigEndian.PutUint32(d[8:], 512)
	d[13] = byte(l.sl.Attrs.Lbppbe) & 0x0f
	if l.Thin() {
		d[14] = 0x80 | 0x40 // LBPME, LBPRZ
	}
	alloc := int(binary.BigEndian.Uint32(scb[10:]))
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], d[:]))
	return api.SAMStatGood
}
