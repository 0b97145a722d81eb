package remote

import (
	"context"
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
	rtpg := &initiator.Command{LUN: lun, CDB: scsi.ReportTargetPortGroupsCDB(uint32(len(buf))), Dir: initiator.DataIn, Data: buf}
	if err := Run(ctx, s, rtpg); err != nil {
		var se *initiator.StatusError
		if errors.As(err, &se) && len(se.Sense) >= 14 && se.Sense[2]&0x0f == scsi.SenseIllegalRequest {
			return nil, nil
		}
		return nil, fmt.Errorf("REPORT TARGET PORT GROUPS: %w", err)
	}
	rtpgData := append([]byte(nil), buf...)
	clear(buf[:256])
	inq := &initiator.Command{LUN: lun, CDB: scsi.DeviceIdentificationCDB(256), Dir: initiator.DataIn, Data: buf[:256]}
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
	gs, err := scsi.ParseTargetPortGroups(rtpg)
	if err != nil {
		return nil, 0, false, err
	}
	local, ok = scsi.LocalPortGroup(vpd)
	for _, g := range gs {
		groups = append(groups, PortGroup{ID: g.ID, State: scsi.ALUAStateName(g.State), InUse: ok && g.ID == local})
	}
	return groups, local, ok, nil
}
