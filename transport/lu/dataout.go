package lu

import (
	"encoding/binary"

	"github.com/ddpstore/ddpstore/transport/scsi"
)

// dataOutLength returns the octets of data-out cdb asks for (Task's
// DataOutLength): its TRANSFER LENGTH in blocks of 512 octets, or its
// PARAMETER LIST LENGTH, as the command has it (SBC-3, SPC-4), 0 for a
// command without data-out. For a command whose CDB does not give the
// length, it is have, the octets the initiator sent, so that no residual
// is reported: an opcode this package does not know, FORMAT UNIT with
// FMTDATA (the parameter list header says), VERIFY's reserved BYTCHK 10b.
// cdb is the zero-padded 16-octet copy the command runs on, so a CDB
// shorter than its opcode's reads as zeros here as it does there. A
// length past 32 bits of octets is clamped to 2^32-1, the most an iSCSI
// residual count says.
func dataOutLength(cdb *[16]byte, have int) uint32 {
	blocks := func(n uint64) uint32 { return uint32(min(n<<9, 0xffffffff)) }
	be16 := func(i int) uint32 { return uint32(binary.BigEndian.Uint16(cdb[i:])) }
	be32 := func(i int) uint32 { return binary.BigEndian.Uint32(cdb[i:]) }
	switch op := cdb[0]; op {
	case scsi.Write6:
		n := uint64(cdb[4])
		if n == 0 {
			n = 256
		}
		return blocks(n)
	case scsi.Write10, scsi.WriteAndVerify10:
		return blocks(uint64(be16(7)))
	case scsi.Write12, scsi.WriteAndVerify12:
		return blocks(uint64(be32(6)))
	case scsi.Write16, scsi.WriteAndVerify16, scsi.OrWrite16:
		return blocks(uint64(be32(10)))
	case scsi.CompareAndWrite:
		return blocks(2 * uint64(cdb[13]))
	case scsi.WriteSame10:
		return 512
	case scsi.WriteSame16:
		if cdb[1]&0x01 != 0 { // NDOB
			return 0
		}
		return 512
	case scsi.Verify10, scsi.Verify12, scsi.Verify16:
		// BYTCHK (SBC-3 5.29): 00b no data-out, 01b TRANSFER LENGTH
		// blocks to compare, 11b one block to compare with each.
		var n uint64
		switch op {
		case scsi.Verify10:
			n = uint64(be16(7))
		case scsi.Verify12:
			n = uint64(be32(6))
		default:
			n = uint64(be32(10))
		}
		switch cdb[1] >> 1 & 0x03 {
		case 0:
			return 0
		case 1:
			return blocks(n)
		case 3:
			return 512
		}
		return uint32(have)
	case scsi.Unmap, scsi.ModeSelect10, scsi.Reserve10, scsi.Release10:
		return be16(7)
	case scsi.ModeSelect6:
		return uint32(cdb[4])
	case scsi.SendDiagnostic:
		return be16(3)
	case scsi.PersistentReserveOut:
		return be32(5)
	case scsi.FormatUnit:
		if cdb[1]&0x10 == 0 { // FMTDATA
			return 0
		}
		return uint32(have)
	case scsi.TestUnitReady, scsi.RequestSense, scsi.Read6, scsi.Inquiry,
		scsi.Reserve6, scsi.Release6, scsi.ModeSense6, scsi.StartStopUnit,
		scsi.PreventAllowMediumRemoval, scsi.ReadCapacity10, scsi.Read10,
		scsi.PreFetch10, scsi.SynchronizeCache10, scsi.ModeSense10,
		scsi.PersistentReserveIn, scsi.Read16, scsi.PreFetch16,
		scsi.SynchronizeCache16, scsi.ServiceActionIn16, scsi.ReportLUNs,
		scsi.MaintenanceIn, scsi.Read12:
		return 0
	}
	return uint32(have)
}
