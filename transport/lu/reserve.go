package lu

import (
	"encoding/binary"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
)

// Nexus identifies the I_T nexus a command came through (SAM-5: the
// initiator port and the target port; for iSCSI, RFC 7143, the initiator
// port is the InitiatorName with the session's ISID and the target port
// the TargetName with the portal group tag, so one nexus is one session).
// The values are the caller's: any two sessions alive at the same time in
// the process must have different ones, and a session keeps its value for
// its whole life.
//
// The zero Nexus is that of a caller that does not tell sessions apart:
// all its commands are taken for one I_T nexus, so no reservation ever
// conflicts between them. That is how Execute behaved before nexuses were
// known here, and how it goes on behaving for a caller that leaves
// Task.Nexus alone.
type Nexus uint64

// SPC-2 reservations.
//
// The LU keeps the SPC-2 reservation (RESERVE(6)/(10), RELEASE(6)/(10)).
// SPC-2 defines the commands; SPC-3 and SPC-4 leave them to SPC-2 and say
// only how they behave next to persistent reservations (SPC-4 r31 5.9.3),
// which this package does not serve (PERSISTENT RESERVE IN/OUT are
// refused: gotgt's are broken), so the SPC-2 rules apply whole. Refusing
// the commands (INVALID COMMAND OPERATION CODE) would be allowed, but an
// initiator that sends them relies on them, and taking them while
// enforcing nothing, as gotgt does, lets two hosts both believe they have
// the disk to themselves. Enforcement needs only the I_T nexus of each
// command, which the transport knows (Task.Nexus).
//
// The rules (SPC-2 5.5.1 and 7.21, 7.22, 7.17, 7.18; clause numbers from
// memory):
//   - RESERVE reserves the whole LU for the I_T nexus that sends it. From
//     the holder it is GOOD again (an initiator may reserve what it
//     holds); from another nexus it is RESERVATION CONFLICT.
//     Third-party reservations (3RDPTY, LONGID) and extents (obsolete) are
//     not supported: INVALID FIELD IN CDB.
//   - RELEASE from the holder releases it; from any other nexus it is GOOD
//     and changes nothing (SPC-2: releasing a reservation one does not
//     hold is not an error).
//   - While the LU is reserved, a command from another nexus ends in
//     RESERVATION CONFLICT (status 18h, no sense data), except INQUIRY,
//     REPORT LUNS, REQUEST SENSE, RELEASE, and PREVENT ALLOW MEDIUM
//     REMOVAL with PREVENT 00b. TEST UNIT READY, READ CAPACITY and MODE
//     SENSE conflict, as they do on the disks of that era (Linux logs
//     "reservation conflict" on a disk reserved by another host); LIO and
//     SPDK let through even less (INQUIRY and RELEASE).
//   - The reservation ends on RELEASE by the holder, on a LOGICAL UNIT
//     RESET of the LU or a reset of the target (Target.LogicalUnitReset,
//     Target.Reset), and on the loss of the holder's I_T nexus
//     (Target.ITNexusLoss): the transport calls those.

// nexusOf returns the I_T nexus of a command, which Execute put in the
// ITNexus gotgt's command record carries for the purpose.
func nexusOf(cmd *api.SCSICommand) Nexus {
	if cmd.ITNexus == nil {
		return 0
	}
	return Nexus(binary.BigEndian.Uint64(cmd.ITNexus.ID[8:]))
}

// setNexus records n in itn, the ITNexus of a command.
func setNexus(itn *api.ITNexus, n Nexus) {
	binary.BigEndian.PutUint64(itn.ID[8:], uint64(n))
}

// conflicts reports whether command cdb from nexus n must end in
// RESERVATION CONFLICT: the LU is reserved by another nexus and the
// command is not one SPC-2 lets through. It allocates nothing.
func (l *LU) conflicts(n Nexus, cdb []byte) bool {
	h := l.holder.Load()
	if h == nil || *h == n {
		return false
	}
	switch cdb[0] {
	case scsi.Inquiry, scsi.ReportLUNs, scsi.RequestSense, scsi.Release6, scsi.Release10:
		return false
	case scsi.PreventAllowMediumRemoval:
		return len(cdb) < 5 || cdb[4]&0x03 != 0
	}
	return true
}

// reserve implements RESERVE(6) and RESERVE(10) (SPC-2 7.21, 7.22): see
// the rules above. A nexus other than the holder does not get here
// (Execute answers it RESERVATION CONFLICT), except in a race with the
// holder's RESERVE, which the compare-and-swap settles.
func reserve(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	if cmd.SCB[1]&0x1f != 0 { // 3RDPTY, third-party device ID or LONGID, extent
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	n := nexusOf(cmd)
	for {
		if h := l.holder.Load(); h != nil {
			if *h == n {
				return api.SAMStatGood
			}
			return api.SAMStatReservationConflict
		}
		if l.holder.CompareAndSwap(nil, &n) {
			return api.SAMStatGood
		}
	}
}

// release implements RELEASE(6) and RELEASE(10) (SPC-2 7.17, 7.18): the
// holder's releases its reservation; anyone else's is GOOD and does
// nothing.
func release(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	if cmd.SCB[1]&0x1f != 0 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	n := nexusOf(cmd)
	if h := l.holder.Load(); h != nil && *h == n {
		l.holder.CompareAndSwap(h, nil)
	}
	return api.SAMStatGood
}

// releaseIf releases the LU's reservation if hold says so of its holder.
func (l *LU) releaseIf(hold func(Nexus) bool) {
	if h := l.holder.Load(); h != nil && hold(*h) {
		l.holder.CompareAndSwap(h, nil)
	}
}

// ITNexusLoss tells the target that the I_T nexus n is gone (SAM-5's I_T
// nexus loss): the reservations n holds on the target's LUs are released.
// transport/target must call it when a session ends: at logout, when its
// last connection is lost and the session is not recovered, and when a
// new session reinstates it (same InitiatorName and ISID) before that one
// runs a command.
func (t *Target) ITNexusLoss(n Nexus) {
	for _, l := range t.luns {
		l.releaseIf(func(h Nexus) bool { return h == n })
	}
}

// LogicalUnitReset releases the reservation of the LU at LUN lun, as a
// LOGICAL UNIT RESET does (SAM-5, SPC-2 5.5.1). transport/target must call
// it for the task management function LOGICAL UNIT RESET (RFC 7143
// 11.5.1) once the LU's tasks are aborted.
func (t *Target) LogicalUnitReset(lun uint16) {
	if l := t.luns[lun]; l != nil {
		l.releaseIf(func(Nexus) bool { return true })
	}
}

// Reset releases the reservations of all the target's LUs, as a hard
// reset does. transport/target must call it for TARGET WARM RESET and
// TARGET COLD RESET (RFC 7143 11.5.1).
func (t *Target) Reset() {
	for n := range t.luns {
		t.LogicalUnitReset(n)
	}
}
