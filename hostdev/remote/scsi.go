package remote

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// ReportLUNs returns the LUN numbers the target reports (REPORT LUNS,
// SPC-4 6.33), in its order.
func ReportLUNs(ctx context.Context, s *initiator.Session) ([]uint16, error) {
	buf, err := s.Alloc(4096)
	if err != nil {
		return nil, err
	}
	defer s.Free(buf)
	cdb := []byte{scsi.ReportLUNs, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}
	if err := Run(ctx, s, &initiator.Command{CDB: cdb, Dir: initiator.DataIn, Data: buf}); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(buf)) / 8
	var luns []uint16
	for i := 0; i < n && 8+8*i+8 <= len(buf); i++ {
		v := binary.BigEndian.Uint16(buf[8+8*i:])
		switch v >> 14 {
		case 0: // peripheral device addressing, bus 0
			luns = append(luns, v&0xff)
		case 1: // flat space addressing
			luns = append(luns, v&0x3fff)
		}
	}
	return luns, nil
}

// DiskLUNs returns the LUNs the target reports that are disks: REPORT LUNS,
// then a standard INQUIRY of each, keeping those whose peripheral
// qualifier is 0 (connected) and whose device type is 00h (direct access,
// SPC-4 6.6.2). Targets such as Linux's tgt report LUN 0 as a controller
// (type 0Ch) that has no capacity to read.
func DiskLUNs(ctx context.Context, s *initiator.Session) ([]uint16, error) {
	luns, err := ReportLUNs(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("REPORT LUNS: %w", err)
	}
	buf, err := s.Alloc(4096)
	if err != nil {
		return nil, err
	}
	defer s.Free(buf)
	disks := luns[:0]
	for _, n := range luns {
		cdb := []byte{scsi.Inquiry, 0, 0, 0, 96, 0}
		if err := Run(ctx, s, &initiator.Command{LUN: n, CDB: cdb, Dir: initiator.DataIn, Data: buf[:96]}); err != nil {
			return nil, fmt.Errorf("INQUIRY of LUN %d: %w", n, err)
		}
		if isDisk(buf[0]) {
			disks = append(disks, n)
		}
	}
	return disks, nil
}

// isDisk reads the first octet of standard INQUIRY data: peripheral
// qualifier 000b and peripheral device type 00h.
func isDisk(b0 byte) bool { return b0 == 0 }

// ReadCapacity returns a LUN's block count and block size (READ
// CAPACITY(16), SBC-3 5.16).
func ReadCapacity(ctx context.Context, s *initiator.Session, lun uint16) (blocks uint64, bs uint32, err error) {
	buf, err := s.Alloc(32)
	if err != nil {
		return 0, 0, err
	}
	defer s.Free(buf)
	cdb := []byte{scsi.ServiceActionIn16, scsi.ReadCapacity16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0}
	if err := Run(ctx, s, &initiator.Command{LUN: lun, CDB: cdb, Dir: initiator.DataIn, Data: buf[:32]}); err != nil {
		return 0, 0, err
	}
	return binary.BigEndian.Uint64(buf) + 1, binary.BigEndian.Uint32(buf[8:]), nil
}

// writeProtected reads the WP bit of the mode parameter header (MODE
// SENSE(6), SBC-3 6.4.1).
func writeProtected(ctx context.Context, s *initiator.Session, lun uint16) (bool, error) {
	buf, err := s.Alloc(4096)
	if err != nil {
		return false, err
	}
	defer s.Free(buf)
	cdb := []byte{scsi.ModeSense6, 0x08, 0x3f, 0, 192, 0} // DBD, all pages
	cmd := &initiator.Command{LUN: lun, CDB: cdb, Dir: initiator.DataIn, Data: buf[:192]}
	if err := Run(ctx, s, cmd); err != nil {
		return false, err
	}
	return buf[2]&0x80 != 0, nil
}

// Run runs a command and turns a status other than GOOD into an error.
func Run(ctx context.Context, s *initiator.Session, cmd *initiator.Command) error {
	if err := s.Do(ctx, cmd); err != nil {
		return err
	}
	if cmd.Status != scsi.StatusGood {
		return &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
	}
	return nil
}
