package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// PortGroup is one target port group as REPORT TARGET PORT GROUPS
// describes it (SPC-4 6.36): its identifier and asymmetric access state,
// and whether the session's own path goes through it.
type PortGroup struct {
	ID    uint16
	State string // active/optimized, active/non-optimized, standby, unavailable, ...
	InUse bool
}

// PortGroups asks LUN lun for its target port groups (REPORT TARGET PORT
// GROUPS) and marks the one of the port the session goes through (the
// target port group designator of INQUIRY's Device Identification page,
// SPC-4 7.8.6.7). A LU without ALUA (TPGS 00b) answers the report with
// ILLEGAL REQUEST: nil and no error.
func PortGroups(ctx context.Context, s *initiator.Session, lun uint16) ([]PortGroup, error) {
	buf, err := s.Alloc(4096)
	if err != nil {
		return nil, err
	}
	defer s.Free(buf)
	rtpg := &initiator.Command{LUN: lun, CDB: []byte{scsi.MaintenanceIn, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, Dir: initiator.DataIn, Data: buf}
	if err := Run(ctx, s, rtpg); err != nil {
		var se *initiator.StatusError
		if errors.As(err, &se) && len(se.Sense) >= 14 && se.Sense[2]&0x0f == scsi.SenseIllegalRequest {
			return nil, nil
		}
		return nil, fmt.Errorf("REPORT TARGET PORT GROUPS: %w", err)
	}
	rtpgData := append([]byte(nil), buf...)
	clear(buf[:256])
	inq := &initiator.Command{LUN: lun, CDB: []byte{scsi.Inquiry, 1, 0x83, 1, 0, 0}, Dir: initiator.DataIn, Data: buf[:256]}
	if err := Run(ctx, s, inq); err != nil {
		return nil, fmt.Errorf("INQUIRY, device identification: %w", err)
	}
	groups, _, _, err := DecodePortGroups(rtpgData, buf[:256])
	return groups, err
}

// DecodePortGroups decodes REPORT TARGET PORT GROUPS data (rtpg) and
// marks the group whose identifier the Device Identification page (vpd)
// names for the port answering: local, ok when vpd names one.
func DecodePortGroups(rtpg, vpd []byte) (groups []PortGroup, local uint16, ok bool, err error) {
	if groups, err = parseRTPG(rtpg); err != nil {
		return nil, 0, false, err
	}
	if local, ok = localGroup(vpd); ok {
		for i := range groups {
			groups[i].InUse = groups[i].ID == local
		}
	}
	return groups, local, ok, nil
}

// parseRTPG decodes REPORT TARGET PORT GROUPS parameter data in the length
// format (SPC-4 6.36.2).
func parseRTPG(b []byte) ([]PortGroup, error) {
	if len(b) < 4 {
		return nil, errors.New("REPORT TARGET PORT GROUPS: short answer")
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, fmt.Errorf("REPORT TARGET PORT GROUPS: %d octets announced, %d arrived", n, len(b)-4)
	}
	var gs []PortGroup
	for d := b[4 : 4+n]; len(d) > 0; {
		if len(d) < 8 || len(d) < 8+4*int(d[7]) {
			return nil, errors.New("REPORT TARGET PORT GROUPS: a descriptor runs past the data")
		}
		gs = append(gs, PortGroup{ID: binary.BigEndian.Uint16(d[2:]), State: aluaState(d[0] & 0x0f)})
		d = d[8+4*int(d[7]):]
	}
	return gs, nil
}

// localGroup finds the target port group designator (association target
// port, type 5) in a Device Identification VPD page.
func localGroup(b []byte) (uint16, bool) {
	if len(b) < 4 || b[1] != 0x83 {
		return 0, false
	}
	n := min(int(binary.BigEndian.Uint16(b[2:])), len(b)-4)
	for d := b[4 : 4+n]; len(d) >= 4 && len(d) >= 4+int(d[3]); d = d[4+int(d[3]):] {
		if d[1]&0x3f == 0x15 && d[3] >= 4 {
			return binary.BigEndian.Uint16(d[6:]), true
		}
	}
	return 0, false
}

// aluaState names an asymmetric access state (SPC-4 Table 161).
func aluaState(s byte) string {
	switch s {
	case 0x0:
		return "active/optimized"
	case 0x1:
		return "active/non-optimized"
	case 0x2:
		return "standby"
	case 0x3:
		return "unavailable"
	case 0xe:
		return "offline"
	case 0xf:
		return "transitioning"
	}
	return fmt.Sprintf("state %#x", s)
}
