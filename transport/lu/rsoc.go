package lu

import (
	"encoding/binary"
	"reflect"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// maintenanceIn serves MAINTENANCE IN (0xA3). Its one service action is
// REPORT SUPPORTED OPERATION CODES (SPC-4 6.35), which gotgt answers with
// CHECK CONDITION for every query about one command, logging an error on
// the way. Linux's sd asks about one command (INQUIRY, then WRITE SAME) at
// every scan, so each Linux login put an error in the log
// (docs/interop.md). All of it is answered here now: gotgt's report of all
// commands lists 9 of them, ignores the allocation length and, with RCTD,
// writes the timeouts descriptor's length over the report's header.
//
// REPORT TARGET PORT GROUPS (alua.go) is served when the target reports
// ALUA.
func maintenanceIn(host int, cmd *api.SCSICommand) api.SAMStat {
	switch cmd.SCB[1] & 0x1f {
	case scsi.ReportSupportedOperationCodes:
		return reportSupportedOperationCodes(host, cmd)
	case serviceActionRTPG:
		return reportTargetPortGroups(cmd)
	}
	return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
}

// saSupported reports whether service action sa of op is served for cmd's
// target.
func saSupported(cmd *api.SCSICommand, op byte, sa uint16) bool {
	if op == scsi.MaintenanceIn && sa == serviceActionRTPG {
		return aluaEnabled(cmd)
	}
	return serviceActions[op][sa]
}

// serviceActions lists, for the opcodes with service actions, those that
// are implemented.
var serviceActions = map[byte]map[uint16]bool{
	scsi.ServiceActionIn16:    {scsi.ReadCapacity16: true, scsi.GetLBAStatus: true},
	scsi.MaintenanceIn:        {scsi.ReportSupportedOperationCodes: true},
	scsi.PersistentReserveIn:  {0: true, 1: true, 2: true, 3: true},
	scsi.PersistentReserveOut: {0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true},
	scsi.MaintenanceOut:       {},
	scsi.VariableLength:       {},
}

// reportSupportedOperationCodes implements REPORTING OPTIONS 000b (all
// commands), 001b (one command without service action) and 010b (one
// command with service action) of REPORT SUPPORTED OPERATION CODES (SPC-4
// 6.35). The CDB USAGE DATA of a supported command marks every bit after
// the opcode as used, which over-states the flexibility of some fields but
// never hides one. With RCTD (return command timeouts descriptor) every
// command descriptor, and the one_command parameter data,
// has CTDP set and carries a command timeouts descriptor (SPC-4 6.35.4) of
// DESCRIPTOR LENGTH 000Ah whose NOMINAL COMMAND PROCESSING TIMEOUT and
// RECOMMENDED COMMAND TIMEOUT are 0, "not specified": no command here has
// a time it keeps to.
func reportSupportedOperationCodes(_ int, cmd *api.SCSICommand) api.SAMStat {
	scb := cmd.SCB
	if len(scb) < 12 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	options, rctd := scb[2]&0x07, scb[2]&0x80 != 0
	op, sa := scb[3], binary.BigEndian.Uint16(scb[4:])
	alloc := int(binary.BigEndian.Uint32(scb[6:]))
	l := luOf(cmd)
	if l == nil {
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
	}
	if options == 0 {
		d := reportAllCommands(cmd, l, rctd)
		in := cmd.InSDBBuffer.Buffer
		cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], d))
		return api.SAMStatGood
	}
	_, hasSA := serviceActions[op]
	var supported bool
	switch {
	case options == 1 && !hasSA:
		supported = implemented(l.ops[op].CommandPerformFunc)
	case options == 2 && hasSA:
		supported = saSupported(cmd, op, sa)
	default:
		// SPC-4: asking about a command without its service action when
		// it has service actions, or with one when it has none, is an
		// invalid field; other reporting options are not implemented.
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	var buf [4 + 16 + 12]byte
	d := buf[:4]
	n := cdbSize(op)
	if supported {
		d[1] = 0x03 // SUPPORT: supported as the standard says
		usage := buf[4 : 4+n]
		usage[0] = op
		for i := 1; i < n; i++ {
			usage[i] = 0xff
		}
		d = buf[:4+n]
	} else {
		d[1] = 0x01 // SUPPORT: not supported
		n = 0
	}
	binary.BigEndian.PutUint16(d[2:], uint16(n))
	if rctd {
		d[1] |= 0x80 // CTDP: a command timeouts descriptor follows
		d = appendTimeouts(d)
	}
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], d))
	return api.SAMStatGood
}

// reportAllCommands returns the all_commands parameter data (SPC-4
// 6.35.2): a command descriptor for each command the LU implements, by
// opcode and then service action, SERVACTV set for the commands that have
// service actions, each followed by a command timeouts descriptor with
// CTDP set when rctd.
func reportAllCommands(cmd *api.SCSICommand, l *LU, rctd bool) []byte {
	d := make([]byte, 4, 4+256*20)
	add := func(op byte, sa uint16, servactv bool) {
		flags := byte(0)
		if servactv {
			flags |= 0x01 // SERVACTV
		}
		if rctd {
			flags |= 0x02 // CTDP
		}
		d = append(d, op, 0, byte(sa>>8), byte(sa), 0, flags, 0, byte(cdbSize(op)))
		if rctd {
			d = appendTimeouts(d)
		}
	}
	for op := range 256 {
		if _, hasSA := serviceActions[byte(op)]; hasSA {
			for sa := range uint16(32) { // a 5-bit SERVICE ACTION field
				if saSupported(cmd, byte(op), sa) {
					add(byte(op), sa, true)
				}
			}
			continue
		}
		if implemented(l.ops[op].CommandPerformFunc) {
			add(byte(op), 0, false)
		}
	}
	binary.BigEndian.PutUint32(d, uint32(len(d)-4)) // COMMAND DATA LENGTH
	return d
}

// appendTimeouts appends a command timeouts descriptor (SPC-4 6.35.4) that
// specifies no timeouts.
func appendTimeouts(d []byte) []byte {
	return append(d, 0x00, 0x0a, 0, 0, // DESCRIPTOR LENGTH, reserved, COMMAND SPECIFIC
		0, 0, 0, 0, // NOMINAL COMMAND PROCESSING TIMEOUT
		0, 0, 0, 0) // RECOMMENDED COMMAND TIMEOUT
}

// implemented reports whether fn is a command's function rather than
// gotgt's answer to an opcode it does not implement.
func implemented(fn api.CommandFunc) bool {
	return fn != nil && reflect.ValueOf(fn).Pointer() != reflect.ValueOf(api.CommandFunc(gscsi.SPCIllegalOp)).Pointer()
}

// cdbSize is the CDB length of opcode op by its group code (SPC-4 4.2.5).
func cdbSize(op byte) int {
	switch op >> 5 {
	case 0:
		return 6
	case 1, 2:
		return 10
	case 4:
		return 16
	case 5:
		return 12
	}
	return 16
}
