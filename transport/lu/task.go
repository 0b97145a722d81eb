package lu

import (
	"reflect"
	"runtime/debug"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
	log "github.com/sirupsen/logrus"
)

// MaxSense is the most sense octets a Task reports: with the 2-octet
// SenseLength they fill the 128-octet data segment that the Linux iSER
// initiator's receive buffers allow a SCSI Response.
const MaxSense = 126

// Task is one SCSI command's execution: gotgt's command record, preallocated
// buffers and the results. A Task is reused from command to command, so
// executing READ and WRITE allocates nothing.
type Task struct {
	cmd   api.SCSICommand
	in    api.SCSIDataBuffer
	out   api.SCSIDataBuffer
	nexus api.ITNexusLuInfo
	itn   api.ITNexus // carries Nexus to the command functions
	cdb   [16]byte
	sense [MaxSense]byte

	// Nexus is the I_T nexus the command comes through, which SPC-2
	// reservations (RESERVE, RELEASE) are held by and checked against.
	// The caller sets it before Execute, which does not change it: a
	// Task record reused for the commands of one session is set once.
	// transport/target must set it to its session's Nexus (see Nexus
	// for the zero value, which is what it sets today).
	Nexus Nexus
	// Port is the initiator port the command comes from, as SPC-4 names
	// it for iSCSI: "InitiatorName,i,0x<ISID in 12 hex digits>" (see
	// InitiatorPort). Persistent reservations belong to it and outlive
	// the session. Like Nexus, the caller sets it once per session;
	// commands with an empty Port are all one initiator port.
	Port string

	// Status is the SAM status (scsi.Status*).
	Status byte
	// Sense is the sense data of a CHECK CONDITION, or empty.
	Sense []byte
	// DataIn is the data-in the command produced: a slice of the LU's store
	// (FromStore) or of the caller's inBuf.
	DataIn []byte
	// FromStore: DataIn is octets [StoreOffset, StoreOffset+len) of LU's
	// store mapping, to be sent without a copy.
	FromStore   bool
	StoreOffset int64
	LU          *LU
	// Produced, when above len(DataIn), is how much data-in the command
	// had for a buffer that held only DataIn (a READ of a remote store
	// with an Expected Data Transfer Length below its TRANSFER LENGTH):
	// the transport reports the difference as a residual overflow.
	Produced uint32

	// DataOutLength is the octets of data-out the CDB asks for: a WRITE's
	// or WRITE AND VERIFY's TRANSFER LENGTH times 512, twice that for
	// COMPARE AND WRITE, one block for WRITE SAME (0 with NDOB), UNMAP's
	// or MODE SELECT's PARAMETER LIST LENGTH, and so on; 0 for a command
	// without data-out (READ, INQUIRY, ...). Execute sets it for every
	// command, whatever the status, from the CDB alone. Where the CDB does
	// not say (an opcode this package does not know, FORMAT UNIT's
	// parameter list), it is len(out), so no residual. Past 2^32-1 it is
	// 2^32-1.
	//
	// The transport compares it with the Expected Data Transfer Length
	// (len(out)) for the SCSI Response's residual (RFC 7143 11.4.5):
	// EDTL < DataOutLength is Residual Overflow by DataOutLength-EDTL,
	// EDTL > DataOutLength Residual Underflow by EDTL-DataOutLength. Of
	// the data-out, WRITE and WRITE AND VERIFY use the lesser of the two
	// (readWrite).
	DataOutLength uint32
}

// NeedsInBuffer reports whether a command with this CDB to LUN lun needs a
// data-in buffer from the caller: every command but a READ of a LU in
// memory, whose data comes straight from the store.
func (t *Target) NeedsInBuffer(lun iscsi.LUN, cdb []byte) bool {
	if len(cdb) == 0 || !isRead(cdb[0]) {
		return true
	}
	l := t.lookup(lun)
	return l == nil || l.Remote()
}

// Waits reports whether the command cdb to LUN lun may wait long: one that
// waits for the medium (SYNCHRONIZE CACHE), any command to a LU whose
// store is not in memory, which waits on the network, and, on a LU that
// takes placements, the commands that wait for placements in flight to end
// (COMPARE AND WRITE, UNMAP, WRITE SAME: see rangeLock), which the
// connection's loop may be the one to end. The transport runs those off
// its connection's loop.
func (t *Target) Waits(lun iscsi.LUN, cdb []byte) bool {
	if len(cdb) > 0 && (cdb[0] == scsi.SynchronizeCache10 || cdb[0] == scsi.SynchronizeCache16) {
		return true
	}
	l := t.lookup(lun)
	return l != nil && (l.Remote() || l.placeable && len(cdb) > 0 && drains(cdb[0]))
}

// lookup returns the LU of lun, nil when none.
func (t *Target) lookup(lun iscsi.LUN) *LU {
	num, err := lun.Number()
	if err != nil {
		return nil
	}
	return t.luns[num]
}

// reset clears the results of the task's last command: GOOD, no sense,
// no data in, out octets received.
func (task *Task) reset(out uint32) {
	task.Status, task.Sense, task.DataIn, task.FromStore, task.StoreOffset, task.LU = scsi.StatusGood, nil, nil, false, 0, nil
	task.Produced, task.DataOutLength = 0, out
}

// Execute runs the command cdb on LUN lun. out holds its data-out octets
// (nil when none): exactly what the initiator sent, which may be more or
// less than the CDB asks for (task.DataOutLength). Data-in of a command
// that is not a READ is written into inBuf, which the caller sizes to the
// command's expected data transfer length. Results are in task.
func (t *Target) Execute(task *Task, lun iscsi.LUN, cdb, out, inBuf []byte) {
	task.reset(uint32(len(out)))
	if len(cdb) == 0 || len(cdb) > len(task.cdb) {
		task.setSense(scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
		return
	}
	c := &task.cmd
	*c = api.SCSICommand{}
	n := copy(task.cdb[:], cdb)
	clear(task.cdb[n:])
	task.DataOutLength = dataOutLength(&task.cdb, len(out))
	c.SCB = task.cdb[:]
	c.SCBLength = n
	c.OpCode = cdb[0]
	c.Target = &t.t
	c.RelTargetPortID = t.relPort()
	task.in = api.SCSIDataBuffer{Buffer: inBuf, Length: uint32(len(inBuf)), Resid: residUnset}
	c.InSDBBuffer = &task.in
	if out != nil {
		task.out = api.SCSIDataBuffer{Buffer: out, Length: uint32(len(out)), TransferLength: uint32(len(out))}
		c.OutSDBBuffer = &task.out
	}
	task.nexus = api.ITNexusLuInfo{}
	c.ITNexusLuInfo = &task.nexus
	setNexus(&task.itn, task.Nexus)
	task.itn.Tag = task.Port
	c.ITNexus = &task.itn
	lun.Put(c.Lun[:])

	num, err := lun.Number()
	var l *LU
	var ops []gscsi.SCSIDeviceOperation
	if err == nil {
		l = t.luns[num]
	}
	if l == nil {
		// SPC-4 4.6.5: INQUIRY and REPORT LUNS work on any LUN; anything
		// else to a LUN that is not there is LOGICAL UNIT NOT SUPPORTED.
		switch cdb[0] {
		case scsi.Inquiry, scsi.ReportLUNs, scsi.RequestSense:
			c.Device, ops = t.lun0, t.ops0
		default:
			task.setSense(scsi.SenseIllegalRequest, scsi.ASCLogicalUnitNotSupported)
			return
		}
	} else {
		c.Device, ops = l.sl, l.ops
		task.nexus.Lu = l.sl
		task.nexus.ID = uint64(num)
		if asc := t.aluaRefuses(cdb); asc != 0 {
			// SPC-4 5.15.2.4.4/5: this port is standby or unavailable.
			task.setSense(senseNotReady, asc)
			return
		}
		if l.conflicts(task.Nexus, cdb) || l.prConflicts(task.Port, cdb) {
			// SPC-2 5.5.1, SPC-4 5.13.1: reserved by another I_T nexus.
			task.Status = scsi.StatusReservationConflict
			return
		}
	}
	remoteRead := l != nil && l.Remote() && isRead(cdb[0])
	if !remoteRead {
		// A remote store's READ fills what it uses of the buffer.
		clear(inBuf)
	}
	stat := t.perform(c, ops)
	if stat.Stat == scsi.StatusBusy {
		// gotgt answers a failure of its backing store with BUSY
		// (SBCReadWrite), which an initiator retries without end. BUSY
		// means the task set cannot take the command now (SAM-5 5.3.1);
		// an I/O error is CHECK CONDITION, MEDIUM ERROR.
		task.setSense(scsi.SenseMediumError, mediumErrorASC(c))
		return
	}
	task.Status = stat.Stat
	if stat.Stat == scsi.StatusCheckCondition {
		if c.SenseBuffer != nil && len(c.SenseBuffer.Buffer) >= 14 {
			task.Sense = task.sense[:copy(task.sense[:], c.SenseBuffer.Buffer)]
		} else {
			// gotgt truncates sense to the CDB's allocation length; keep
			// at least the sense key it recorded in Result.
			task.setSense(c.Result, 0)
		}
	}
	if stat.Stat != scsi.StatusGood {
		return
	}
	if remoteRead {
		task.DataIn, task.Produced = inBuf[:c.InSDBBuffer.Resid], c.TL
		return
	}
	if l != nil && isRead(cdb[0]) {
		task.DataIn, task.FromStore, task.LU = c.InSDBBuffer.Buffer, true, l
		task.StoreOffset = int64(c.Offset)
		return
	}
	// Our command functions and some of gotgt's set Resid to the length
	// of the data they produced (0 included: an ALLOCATION LENGTH of 0
	// transfers nothing); for the others the whole (zeroed) buffer is
	// the data.
	task.DataIn = inBuf
	if r := c.InSDBBuffer.Resid; r != residUnset && int64(r) < int64(len(inBuf)) {
		task.DataIn = inBuf[:r]
	}
}

// residUnset is the Resid of a data-in buffer whose command did not say
// how much data it produced.
const residUnset = ^uint32(0)

// perform runs the LU's function for the opcode (gotgt's or ours). A
// memory fault in it, which is how an I/O error of a mapped store shows
// (SIGBUS: a file truncated under its mapping, a full file system under a
// sparse file, a failing disk), is answered with CHECK CONDITION, MEDIUM
// ERROR; any other panic with HARDWARE ERROR, rather than taking the
// target down.
func (t *Target) perform(c *api.SCSICommand, ops []gscsi.SCSIDeviceOperation) (stat api.SAMStat) {
	defer func() {
		if r := recover(); r != nil {
			if f, fault := r.(interface{ Addr() uintptr }); fault {
				log.WithField("target", t.t.Name).Errorf("lu: memory fault at %#x (an I/O error of the backing store) on opcode %#02x", f.Addr(), c.SCB[0])
				stat = checkCondition(c, scsi.SenseMediumError, mediumErrorASC(c))
				return
			}
			log.WithField("target", t.t.Name).Errorf("lu: panic on opcode %#02x: %v", c.SCB[0], r)
			stat = checkCondition(c, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	op := c.SCB[0]
	if int(op) >= len(ops) || ops[op].CommandPerformFunc == nil || isIllegalOp(ops[op].CommandPerformFunc) {
		return checkCondition(c, scsi.SenseIllegalRequest, scsi.ASCInvalidCommandOperationCode)
	}
	c.State = api.SCSICommandProcessed
	return ops[op].CommandPerformFunc(0, c)
}

// mediumErrorASC returns the additional sense code of a MEDIUM ERROR of
// c: the one gotgt chose if it chose MEDIUM ERROR, else WRITE ERROR for a
// command that changes the medium and UNRECOVERED READ ERROR otherwise.
func mediumErrorASC(c *api.SCSICommand) uint16 {
	if s := c.SenseBuffer; s != nil && len(s.Buffer) >= 14 && s.Buffer[0]&0x7f == scsi.SenseFixedCurrent && s.Buffer[2]&0x0f == scsi.SenseMediumError {
		return uint16(s.Buffer[12])<<8 | uint16(s.Buffer[13])
	}
	if changesMedium(c.SCB[0]) {
		return scsi.ASCWriteError
	}
	return scsi.ASCUnrecoveredReadError
}

// isIllegalOp reports whether fn is gotgt's handler of unsupported
// opcodes, whose sense data gotgt truncates to the CDB's allocation length.
func isIllegalOp(fn api.CommandFunc) bool {
	return reflect.ValueOf(fn).Pointer() == illegalOpPC
}

var illegalOpPC = reflect.ValueOf(api.CommandFunc(gscsi.SPCIllegalOp)).Pointer()

// setSense fails the task with CHECK CONDITION and fixed-format sense data
// (SPC-4 4.5.3) of key and additional sense code asc.
func (task *Task) setSense(key byte, asc uint16) {
	s := task.sense[:18]
	clear(s)
	s[0], s[2], s[7] = scsi.SenseFixedCurrent, key, 10
	s[12], s[13] = byte(asc>>8), byte(asc)
	task.Status, task.Sense = scsi.StatusCheckCondition, s
}
