package lu

import (
	"encoding/binary"
	"sync"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	log "github.com/sirupsen/logrus"
)

// Persistent reservations (SPC-4 5.13, PERSISTENT RESERVE IN 6.15 and
// OUT 6.16).
//
// An I_T nexus registers a reservation key with the LU; a registered
// nexus may then reserve the LU with one of six types, and the LU answers
// other nexuses' commands RESERVATION CONFLICT by that type:
//
//	type                          reads by others          writes by others
//	Write Exclusive (1)           allowed                  holder only
//	Exclusive Access (3)          holder only              holder only
//	WE Registrants Only (5)       allowed                  registrants
//	EA Registrants Only (6)       registrants              registrants
//	WE All Registrants (7)        allowed                  registrants
//	EA All Registrants (8)        registrants              registrants
//
// For the All Registrants types every registrant holds the reservation;
// for the others one nexus does, and registrants only have access.
// Registrations and the reservation outlive the sessions (they belong to
// the initiator port, the iSCSI InitiatorName with the session's ISID:
// a session that reconnects with the same ISID is the same nexus), are
// not released by LOGICAL UNIT RESET or I_T nexus loss, and, when the
// last REGISTER asked for it (APTPL) and the LU has a state file
// (Options.PRState), survive a restart of the target (pr_state.go).
//
// What is not served, and how it is refused: REGISTER AND MOVE (INVALID
// FIELD IN CDB), SPEC_I_PT and ALL_TG_PT (INVALID FIELD IN PARAMETER
// LIST: REPORT CAPABILITIES says SIP_C and ATP_C are 0; a target has one
// target port here), scopes other than LU_SCOPE. PREEMPT AND ABORT
// preempts as PREEMPT does; the preempted nexuses' tasks are not aborted
// (they complete: a task here runs to its end in microseconds, there is
// no queue to abort from). Unit attentions to other registrants
// (RESERVATIONS PREEMPTED, RELEASED, REGISTRATIONS PREEMPTED) are not
// established.
//
// SPC-2 RESERVE and RELEASE from any nexus are RESERVATION CONFLICT while
// the LU has a registration (CRH 0, SPC-4 5.13.3), and persistent
// reservation commands conflict under another nexus' SPC-2 reservation
// (reserve.go).

// Reservation types (SPC-4 table 191).
const (
	prWriteExclusive       = 1
	prExclusiveAccess      = 3
	prWriteExclusiveRegs   = 5
	prExclusiveAccessRegs  = 6
	prWriteExclusiveAll    = 7
	prExclusiveAccessAll   = 8
	prTypeMask0            = 0x80 | 0x40 | 0x20 | 0x08 | 0x02 // REPORT CAPABILITIES' first mask octet
	prTypeMask1            = 0x01
	prOutParameterListSize = 24
)

// PERSISTENT RESERVE IN and OUT service actions.
const (
	prInReadKeys          = 0
	prInReadReservation   = 1
	prInReportCaps        = 2
	prInReadFullStatus    = 3
	prOutRegister         = 0
	prOutReserve          = 1
	prOutRelease          = 2
	prOutClear            = 3
	prOutPreempt          = 4
	prOutPreemptAndAbort  = 5
	prOutRegisterIgnore   = 6
	prOutRegisterAndMove  = 7
	ascInvalidReleaseOfPR = 0x2604 // INVALID RELEASE OF PERSISTENT RESERVATION
)

// registration is one I_T nexus' reservation key.
type registration struct {
	Port string `json:"port"` // the initiator port: InitiatorName,i,0x<ISID>
	Key  uint64 `json:"key"`
}

// prState is an LU's persistent reservation state. mu guards it; the
// conflict check of every command takes it only while a registration
// exists (LU.prActive).
type prState struct {
	mu sync.Mutex
	prData
	path string // state file for APTPL; "" when the LU has none
	// shared, when set, holds the state for every gateway exporting the
	// LU's store (SetSharedPR); version is the version of it prData is.
	shared  SharedPR
	version uint64
	// outMu serializes PERSISTENT RESERVE OUT; a shared store's commit
	// waits for the other gateways without s.mu, which their change
	// notifications need.
	outMu sync.Mutex
}

// prData is the state proper, which a failed PROUT rolls back.
type prData struct {
	generation uint32         // PRgeneration: bumped by every PROUT but RESERVE and RELEASE
	regs       []registration // in order of registration
	holder     string         // the reserving port; "" with all-registrants types
	typ        byte           // 0: not reserved
	aptpl      bool
}

// find returns the index of port's registration, or -1.
func (s *prState) find(port string) int {
	for i := range s.regs {
		if s.regs[i].Port == port {
			return i
		}
	}
	return -1
}

// allRegistrants reports whether the reservation type is held by every
// registrant.
func allRegistrants(typ byte) bool { return typ == prWriteExclusiveAll || typ == prExclusiveAccessAll }

// holds reports whether port holds the reservation.
func (s *prState) holds(port string) bool {
	if s.typ == 0 {
		return false
	}
	if allRegistrants(s.typ) {
		return s.find(port) >= 0
	}
	return s.holder == port
}

// prConflicts reports whether command cdb from port must end in
// RESERVATION CONFLICT under the LU's persistent reservation.
func (l *LU) prConflicts(port string, cdb []byte) bool {
	if !l.prActive.Load() {
		return false
	}
	s := &l.pr
	s.mu.Lock()
	defer s.mu.Unlock()
	switch cdb[0] {
	case scsi.Reserve6, scsi.Reserve10, scsi.Release6, scsi.Release10:
		return len(s.regs) > 0 // CRH 0
	case scsi.Inquiry, scsi.ReportLUNs, scsi.RequestSense, scsi.TestUnitReady,
		scsi.PersistentReserveIn, scsi.PersistentReserveOut, scsi.ReadCapacity10,
		scsi.MaintenanceIn:
		return false
	case scsi.ServiceActionIn16:
		if len(cdb) > 1 && cdb[1]&0x1f == scsi.ReadCapacity16 {
			return false
		}
	}
	if s.typ == 0 || s.holds(port) {
		return false
	}
	registered := s.find(port) >= 0
	write := changesMedium(cdb[0]) || !readsOnly(cdb[0])
	switch s.typ {
	case prWriteExclusive:
		return write
	case prExclusiveAccess:
		return true
	case prWriteExclusiveRegs, prWriteExclusiveAll:
		return write && !registered
	default: // the Exclusive Access registrants types
		return !registered
	}
}

// readsOnly reports whether op only reads the medium or the LU's state,
// for the Write Exclusive types, which let such commands through.
func readsOnly(op byte) bool {
	switch op {
	case scsi.Read6, scsi.Read10, scsi.Read12, scsi.Read16, scsi.Verify10, scsi.Verify12,
		scsi.Verify16, scsi.PreFetch10, scsi.PreFetch16, scsi.ModeSense6, scsi.ModeSense10,
		scsi.ServiceActionIn16:
		return true
	}
	return false
}

// persistentReserveIn implements PERSISTENT RESERVE IN (SPC-4 6.15).
func persistentReserveIn(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	alloc := int(binary.BigEndian.Uint16(scb[7:]))
	s := &l.pr
	s.mu.Lock()
	if err := l.prRefresh(); err != nil {
		// Answer from what this gateway knows, which the other gateways'
		// notifications keep current.
		log.WithField("lu", l.id).Warnf("lu: persistent reservations: %v", err)
	}
	var b []byte
	switch scb[1] & 0x1f {
	case prInReadKeys:
		b = binary.BigEndian.AppendUint32(b, s.generation)
		b = binary.BigEndian.AppendUint32(b, uint32(8*len(s.regs)))
		for _, r := range s.regs {
			b = binary.BigEndian.AppendUint64(b, r.Key)
		}
	case prInReadReservation:
		b = binary.BigEndian.AppendUint32(b, s.generation)
		if s.typ == 0 {
			b = binary.BigEndian.AppendUint32(b, 0)
			break
		}
		b = binary.BigEndian.AppendUint32(b, 16)
		var key uint64 // 0 for the all-registrants types (SPC-4 6.15.3.3)
		if !allRegistrants(s.typ) {
			key = s.regs[s.find(s.holder)].Key
		}
		b = binary.BigEndian.AppendUint64(b, key)
		b = append(b, 0, 0, 0, 0, 0, s.typ, 0, 0) // obsolete, reserved, SCOPE 0 (LU) | TYPE, obsolete
	case prInReportCaps:
		var caps byte // CRH 0, SIP_C 0, ATP_C 0
		if s.path != "" || s.shared != nil {
			caps |= 0x01 // PTPL_C
		}
		var a byte = 0x80 // TMV: the type mask is valid; ALLOW COMMANDS 000b
		if s.aptpl {
			a |= 0x01 // PTPL_A
		}
		b = append(b, 0, 8, caps, a, prTypeMask0, prTypeMask1, 0, 0)
	case prInReadFullStatus:
		b = binary.BigEndian.AppendUint32(b, s.generation)
		b = append(b, 0, 0, 0, 0) // ADDITIONAL LENGTH, set below
		for _, r := range s.regs {
			b = binary.BigEndian.AppendUint64(b, r.Key)
			b = append(b, 0, 0, 0, 0)
			var holder, scopeType byte
			if s.holds(r.Port) {
				holder, scopeType = 0x01, s.typ
			}
			b = append(b, holder, scopeType, 0, 0, 0, 0)
			b = binary.BigEndian.AppendUint16(b, 1) // RELATIVE TARGET PORT IDENTIFIER
			id := transportID(r.Port)
			b = binary.BigEndian.AppendUint32(b, uint32(len(id)))
			b = append(b, id...)
		}
		binary.BigEndian.PutUint32(b[4:], uint32(len(b)-8))
	default:
		s.mu.Unlock()
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	s.mu.Unlock()
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], b))
	return api.SAMStatGood
}

// transportID is the iSCSI TransportID of an initiator port (SPC-4
// 7.6.4.6, FORMAT CODE 01b): protocol identifier 5h, the port name
// "InitiatorName,i,0x<ISID>" with a terminating NUL, padded to a multiple
// of 4 octets.
func transportID(port string) []byte {
	n := (len(port) + 1 + 3) &^ 3
	b := make([]byte, 4+n)
	b[0] = 0x40 | 0x05
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	copy(b[4:], port)
	return b
}

// persistentReserveOut implements PERSISTENT RESERVE OUT (SPC-4 6.16 and
// 5.13): see the rules above.
func persistentReserveOut(_ int, cmd *api.SCSICommand) api.SAMStat {
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	scb := cmd.SCB
	sa, scope, typ := scb[1]&0x1f, scb[2]>>4, scb[2]&0x0f
	if sa > prOutRegisterIgnore {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	var p []byte
	if cmd.OutSDBBuffer != nil {
		p = cmd.OutSDBBuffer.Buffer
	}
	if binary.BigEndian.Uint32(scb[5:]) != prOutParameterListSize || len(p) < prOutParameterListSize {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCParameterListLengthError)
	}
	key, sakey, flags := binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:]), p[20]
	if flags&0x0c != 0 { // SPEC_I_PT, ALL_TG_PT
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInParameterList)
	}
	aptpl := flags&0x01 != 0
	port := portOf(cmd)
	s := &l.pr
	s.outMu.Lock()
	defer s.outMu.Unlock()
	for range prTries {
		s.mu.Lock()
		if err := l.prRefresh(); err != nil {
			s.mu.Unlock()
			log.WithField("lu", l.id).Errorf("lu: persistent reservations: %v", err)
			return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
		}
		before := s.snapshot()
		stat, changed := l.prOut(cmd, sa, scope, typ, key, sakey, aptpl, port)
		if !changed {
			s.mu.Unlock()
			return stat
		}
		if s.shared == nil {
			stat = l.prCommit(cmd, before)
			s.mu.Unlock()
			return stat
		}
		stat, stale := l.prStoreShared(cmd, before)
		if !stale {
			return stat
		}
		// Another gateway changed the state since it was loaded: load it
		// again and apply the command to what it is now.
	}
	log.WithField("lu", l.id).Errorf("lu: persistent reservations: the shared state changed under %d tries in a row", prTries)
	return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
}

// prTries bounds how often a PERSISTENT RESERVE OUT is applied anew when
// other gateways keep changing the shared state first.
const prTries = 16

// prOut applies a PERSISTENT RESERVE OUT to the state (s.mu held) and
// reports whether it changed the state, which the caller then commits;
// when it did not, stat is the command's answer.
func (l *LU) prOut(cmd *api.SCSICommand, sa, scope, typ byte, key, sakey uint64, aptpl bool, port string) (stat api.SAMStat, changed bool) {
	s := &l.pr
	i := s.find(port)
	if sa == prOutRegister || sa == prOutRegisterIgnore {
		if aptpl && s.path == "" && s.shared == nil {
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInParameterList), false
		}
		switch {
		case i < 0 && sa == prOutRegister && key != 0:
			return api.SAMStatReservationConflict, false
		case i >= 0 && sa == prOutRegister && key != s.regs[i].Key:
			return api.SAMStatReservationConflict, false
		case i < 0 && sakey == 0:
			return api.SAMStatGood, false // nothing to register or to remove
		case i < 0:
			s.regs = append(s.regs, registration{Port: port, Key: sakey})
		case sakey == 0:
			s.unregister(i)
		default:
			s.regs[i].Key = sakey
		}
		s.aptpl = aptpl
		s.generation++
		return api.SAMStatGood, true
	}
	// Every other service action needs a registered nexus whose key
	// matches (SPC-4 5.13.x: else RESERVATION CONFLICT).
	if i < 0 || s.regs[i].Key != key {
		return api.SAMStatReservationConflict, false
	}
	switch sa {
	case prOutReserve, prOutPreempt, prOutPreemptAndAbort:
		if scope != 0 || !validType(typ) {
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB), false
		}
	}
	switch sa {
	case prOutReserve:
		switch {
		case s.typ == 0:
			s.typ, s.holder = typ, port
			if allRegistrants(typ) {
				s.holder = ""
			}
		case s.holds(port) && s.typ == typ:
		default:
			return api.SAMStatReservationConflict, false
		}
		return api.SAMStatGood, true
	case prOutRelease:
		if s.typ == 0 || !s.holds(port) {
			return api.SAMStatGood, false
		}
		if scope != 0 || typ != s.typ {
			return checkCondition(cmd, scsi.SenseIllegalRequest, ascInvalidReleaseOfPR), false
		}
		s.typ, s.holder = 0, ""
		return api.SAMStatGood, true
	case prOutClear:
		s.regs, s.typ, s.holder = s.regs[:0], 0, ""
		s.generation++
		return api.SAMStatGood, true
	default: // PREEMPT, PREEMPT AND ABORT (SPC-4 5.13.11)
		switch {
		case s.typ != 0 && allRegistrants(s.typ) && sakey == 0:
			// Every other registration goes; the preempting nexus
			// takes the reservation with the new type.
			s.regs = append(s.regs[:0], s.regs[i])
			s.typ, s.holder = typ, port
			if allRegistrants(typ) {
				s.holder = ""
			}
		case s.typ != 0 && !allRegistrants(s.typ) && sakey == s.regs[s.find(s.holder)].Key:
			// The holder is preempted: its registrations (and any with
			// its key) go, the reservation passes to this nexus.
			s.removeKey(sakey, port)
			s.typ, s.holder = typ, port
			if allRegistrants(typ) {
				s.holder = ""
			}
		case sakey == 0:
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInParameterList), false
		default:
			if !s.removeKey(sakey, port) {
				return api.SAMStatReservationConflict, false
			}
		}
		s.generation++
		return api.SAMStatGood, true
	}
}

// validType reports whether typ is one of the six reservation types.
func validType(typ byte) bool {
	switch typ {
	case prWriteExclusive, prExclusiveAccess, prWriteExclusiveRegs, prExclusiveAccessRegs,
		prWriteExclusiveAll, prExclusiveAccessAll:
		return true
	}
	return false
}

// unregister removes registration i, and with it the reservation when
// that nexus held it alone, or when it was the last registrant of an
// all-registrants reservation (SPC-4 5.13.11.2.3).
func (s *prState) unregister(i int) {
	port := s.regs[i].Port
	s.regs = append(s.regs[:i], s.regs[i+1:]...)
	if s.typ != 0 && (s.holder == port || allRegistrants(s.typ) && len(s.regs) == 0) {
		s.typ, s.holder = 0, ""
	}
}

// removeKey removes the registrations with key, except keep's own when
// the preempting nexus names its own key (it keeps its registration, as
// SPC-4 lets a nexus preempt itself). It reports whether any went.
func (s *prState) removeKey(key uint64, keep string) bool {
	removed := false
	out := s.regs[:0]
	for _, r := range s.regs {
		if r.Key == key && r.Port != keep {
			removed = true
			if s.holder == r.Port {
				s.holder = ""
			}
			continue
		}
		out = append(out, r)
	}
	clear(s.regs[len(out):])
	s.regs = out
	return removed || key == s.regs[s.find(keep)].Key
}

// portOf returns the initiator port of a command (Task.Port), which
// Execute put in the Tag of the command's ITNexus.
func portOf(cmd *api.SCSICommand) string {
	if cmd.ITNexus == nil {
		return ""
	}
	return cmd.ITNexus.Tag
}
