package scsi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Asymmetric access states (SPC-4 6.36, Table 161).
const (
	ALUAActiveOptimized    = 0x0
	ALUAActiveNonOptimized = 0x1
	ALUAStandby            = 0x2
	ALUAUnavailable        = 0x3
	ALUAOffline            = 0xe
	ALUATransitioning      = 0xf
)

// ALUAStateName names an asymmetric access state.
func ALUAStateName(s byte) string {
	switch s {
	case ALUAActiveOptimized:
		return "active/optimized"
	case ALUAActiveNonOptimized:
		return "active/non-optimized"
	case ALUAStandby:
		return "standby"
	case ALUAUnavailable:
		return "unavailable"
	case ALUAOffline:
		return "offline"
	case ALUATransitioning:
		return "transitioning"
	}
	return fmt.Sprintf("state %#x", s)
}

// TargetPortGroup is one descriptor of REPORT TARGET PORT GROUPS.
type TargetPortGroup struct {
	ID    uint16
	State byte // asymmetric access state
}

// ReportTargetPortGroupsCDB is REPORT TARGET PORT GROUPS (MAINTENANCE IN,
// SPC-4 6.36) in the length-only format, for alloc octets.
func ReportTargetPortGroupsCDB(alloc uint32) []byte {
	c := []byte{MaintenanceIn, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(c[6:], alloc)
	return c
}

// ParseTargetPortGroups decodes REPORT TARGET PORT GROUPS parameter data in
// the length-only format (SPC-4 6.36.2).
func ParseTargetPortGroups(b []byte) ([]TargetPortGroup, error) {
	if len(b) < 4 {
		return nil, errors.New("REPORT TARGET PORT GROUPS: short answer")
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, fmt.Errorf("REPORT TARGET PORT GROUPS: %d octets announced, %d arrived", n, len(b)-4)
	}
	var gs []TargetPortGroup
	for d := b[4 : 4+n]; len(d) > 0; {
		if len(d) < 8 || len(d) < 8+4*int(d[7]) {
			return nil, errors.New("REPORT TARGET PORT GROUPS: a descriptor runs past the data")
		}
		gs = append(gs, TargetPortGroup{ID: binary.BigEndian.Uint16(d[2:]), State: d[0] & 0x0f})
		d = d[8+4*int(d[7]):]
	}
	return gs, nil
}

// DeviceIdentificationCDB is INQUIRY for the Device Identification VPD
// page (SPC-4 7.8.6), alloc octets.
func DeviceIdentificationCDB(alloc uint16) []byte {
	return []byte{Inquiry, 1, 0x83, byte(alloc >> 8), byte(alloc), 0}
}

// LocalPortGroup finds the target port group designator (association
// target port, type 5: SPC-4 7.8.6.7) in a Device Identification VPD page:
// the group of the port the page came through.
func LocalPortGroup(vpd []byte) (uint16, bool) {
	if len(vpd) < 4 || vpd[1] != 0x83 {
		return 0, false
	}
	n := min(int(binary.BigEndian.Uint16(vpd[2:])), len(vpd)-4)
	for d := vpd[4 : 4+n]; len(d) >= 4 && len(d) >= 4+int(d[3]); d = d[4+int(d[3]):] {
		if d[1]&0x3f == 0x15 && d[3] >= 4 {
			return binary.BigEndian.Uint16(d[6:]), true
		}
	}
	return 0, false
}
