package lu

import (
	"encoding/binary"
	"fmt"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
)

// Asymmetric logical unit access (SPC-4 5.15), implicit: several
// ddptarget processes (gateways) export the same LUs under the same target
// name, each through its own target port in its own target port group,
// and every one of them reports every group with its access state, so an
// initiator sees one LU with several paths and knows which to prefer.
// States change by configuration (a reload), not by SET TARGET PORT
// GROUPS, which is not served (TPGS 01b: implicit only).

// ALUAState is a target port group's asymmetric access state (SPC-4
// 6.37, table 178).
type ALUAState byte

// The access states served.
const (
	ActiveOptimized    ALUAState = 0x0
	ActiveNonOptimized ALUAState = 0x1
	Standby            ALUAState = 0x2
	Unavailable        ALUAState = 0x3
)

func (s ALUAState) String() string {
	switch s {
	case ActiveOptimized:
		return "active/optimized"
	case ActiveNonOptimized:
		return "active/non-optimized"
	case Standby:
		return "standby"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("ALUA state %#x", byte(s))
}

// PortGroup is one target port group: its identifier, its access state,
// and its one target port, whose relative target port identifier is the
// group's identifier.
type PortGroup struct {
	ID    uint16
	State ALUAState
}

// alua is a Target's ALUA configuration.
type alua struct {
	local  PortGroup   // this process's group (and port)
	groups []PortGroup // every group, local included, in ID order
}

// SetPortGroups turns ALUA on: the target's port is the one of group local
// (relative target port identifier local), and REPORT TARGET PORT GROUPS
// reports groups, which must hold local. It must be called before the
// target serves commands.
func (t *Target) SetPortGroups(local uint16, groups []PortGroup) error {
	a := &alua{}
	seen := map[uint16]bool{}
	for _, g := range groups {
		switch {
		case g.ID == 0:
			return fmt.Errorf("lu: target port group 0: identifiers start at 1")
		case seen[g.ID]:
			return fmt.Errorf("lu: target port group %d listed twice", g.ID)
		case g.State > Unavailable:
			return fmt.Errorf("lu: target port group %d: %v is not served", g.ID, g.State)
		}
		seen[g.ID] = true
		if g.ID == local {
			a.local = g
		}
		a.groups = append(a.groups, g)
	}
	if !seen[local] {
		return fmt.Errorf("lu: this target's port group %d is not among the groups", local)
	}
	for i := 1; i < len(a.groups); i++ {
		for j := i; j > 0 && a.groups[j].ID < a.groups[j-1].ID; j-- {
			a.groups[j], a.groups[j-1] = a.groups[j-1], a.groups[j]
		}
	}
	t.alua = a
	t.t.TargetPortGroups = nil
	for _, g := range a.groups {
		t.t.TargetPortGroups = append(t.t.TargetPortGroups, &api.TargetPortGroup{GroupID: g.ID,
			TargetPortGroup: []*api.SCSITargetPort{{RelativeTargetPortID: g.ID, TargetPortName: t.t.Name}}})
	}
	return nil
}

// relPort is the relative target port identifier of the target's port.
func (t *Target) relPort() uint16 {
	if t.alua == nil {
		return 1
	}
	return t.alua.local.ID
}

// commandTarget returns the Target a command came to.
func commandTarget(cmd *api.SCSICommand) *Target {
	if cmd.Target == nil {
		return nil
	}
	t, _ := cmd.Target.SCSITargetDriver.(*Target)
	return t
}

// aluaEnabled reports whether the command's target reports ALUA (INQUIRY
// TPGS 01b).
func aluaEnabled(cmd *api.SCSICommand) bool {
	t := commandTarget(cmd)
	return t != nil && t.alua != nil
}

// reportTargetPortGroups implements REPORT TARGET PORT GROUPS (SPC-4
// 6.37), MAINTENANCE IN service action 0Ah, with the length-only header
// (PARAMETER DATA FORMAT 000b) or the extended one (001b).
func reportTargetPortGroups(cmd *api.SCSICommand) api.SAMStat {
	t := commandTarget(cmd)
	if t == nil || t.alua == nil {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	format := cmd.SCB[1] >> 5
	if format > 1 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	b := make([]byte, 4, 64)
	if format == 1 {
		b = append(b, 0x10, 0, 0, 0) // FORMAT TYPE 001b; IMPLICIT TRANSITION TIME 0: unspecified
	}
	for _, g := range t.alua.groups {
		const supported = 0x08 | 0x04 | 0x02 | 0x01 // U_SUP S_SUP AN_SUP AO_SUP
		pref := byte(0)
		b = append(b, pref|byte(g.State), supported, byte(g.ID>>8), byte(g.ID), 0,
			0x02, // STATUS CODE: altered by implicit asymmetric access behaviour
			0, 1, // vendor specific, TARGET PORT COUNT
			0, 0, byte(g.ID>>8), byte(g.ID))
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	alloc := int(binary.BigEndian.Uint32(cmd.SCB[6:]))
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], b))
	return api.SAMStatGood
}

// aluaRefuses returns the additional sense code with which a command to
// a port in the standby or unavailable state is answered NOT READY, or 0
// when it may run (SPC-4 5.15.2.4.4, 5.15.2.4.5: what identifies the LU
// and the paths, sense, reservations and the target port groups work in
// those states; media access does not).
func (t *Target) aluaRefuses(cdb []byte) uint16 {
	if t.alua == nil {
		return 0
	}
	var asc uint16
	switch t.alua.local.State {
	case Standby:
		asc = ascNotAccessibleStandby
	case Unavailable:
		asc = ascNotAccessibleUnavailable
	default:
		return 0
	}
	switch cdb[0] {
	case scsi.Inquiry, scsi.ReportLUNs, scsi.RequestSense, scsi.MaintenanceIn,
		scsi.ModeSense6, scsi.ModeSense10:
		return 0
	case scsi.PersistentReserveIn, scsi.PersistentReserveOut:
		if t.alua.local.State == Standby {
			return 0
		}
	}
	return asc
}

// Additional sense codes of NOT READY, LOGICAL UNIT NOT ACCESSIBLE.
const (
	ascNotAccessibleStandby     = 0x040b // TARGET PORT IN STANDBY STATE
	ascNotAccessibleUnavailable = 0x040c // TARGET PORT IN UNAVAILABLE STATE
	senseNotReady               = 0x02
	serviceActionRTPG           = 0x0a
)
