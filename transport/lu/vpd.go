package lu

import (
	"encoding/binary"
	"fmt"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// portalGroupTag is the Target Portal Group Tag the transport's targets
// log in with (transport/target); a target port's SCSI name is the target
// name, ",t,0x" and the tag in hexadecimal (RFC 7143's iSCSI target port
// name, from memory; Linux's LIO prints it the same way).
const portalGroupTag = 1

// inquiry answers INQUIRY (SPC-4 6.6), all of it: the standard data and
// every vital product data page listed in Supported VPD Pages (0x00): Unit
// Serial Number (0x80), Device Identification (0x83, gotgt's dereferences
// the target port it looks up), Block Limits (0xB0), Block Device
// Characteristics (0xB1) and Logical Block Provisioning (0xB2). Thin
// provisioning in B0, B2 and READ CAPACITY(16) all come from LU.Thin.
//
// Each answer is built whole, its PAGE LENGTH (or the standard data's
// ADDITIONAL LENGTH) saying its full length, and then cut to the
// ALLOCATION LENGTH (SPC-4 4.2.5.6: the device server transfers the
// lesser of the allocation length and the data available, and does not
// adjust any field for the truncation; the application client compares
// the length field with what it asked for).
//
// The CDB is checked as SPC-4 6.6.1 says: a PAGE CODE other than 0 without
// EVPD, and the obsolete CMDDT bit, are INVALID FIELD IN CDB, as is a page
// not in the list.
func inquiry(_ int, cmd *api.SCSICommand) api.SAMStat {
	scb := cmd.SCB
	evpd, cmddt := scb[1]&0x01 != 0, scb[1]&0x02 != 0
	if cmd.Device == nil || cmddt || !evpd && scb[2] != 0 {
		return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
	}
	var buf [512]byte
	var page []byte
	l := luOf(cmd)
	if !evpd {
		page = standardInquiry(buf[:0], cmd)
	} else {
		switch scb[2] {
		case 0x00:
			page = append(vpdHeader(buf[:0], cmd), vpdPages...)
		case 0x80:
			page = unitSerialNumber(vpdHeader(buf[:0], cmd), cmd)
		case 0x83:
			page = deviceIdentification(vpdHeader(buf[:0], cmd), cmd, l)
		case 0xb0:
			page = blockLimits(vpdHeader(buf[:0], cmd), l)
		case 0xb1:
			page = blockDeviceCharacteristics(vpdHeader(buf[:0], cmd))
		case 0xb2:
			page = provisioning(vpdHeader(buf[:0], cmd), l)
		default:
			return checkCondition(cmd, scsi.SenseIllegalRequest, scsi.ASCInvalidFieldInCDB)
		}
		binary.BigEndian.PutUint16(page[2:], uint16(len(page)-4))
	}
	alloc := int(binary.BigEndian.Uint16(scb[3:]))
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], page))
	return api.SAMStatGood
}

// vpdPages are the VPD pages inquiry serves, in ascending order (SPC-4
// 7.8.13, Supported VPD Pages).
var vpdPages = []byte{0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2}

// versionDescriptors are the standards the standard INQUIRY data claims
// (SPC-4 6.6.2, table "Version descriptor values", each "no version
// claimed"): SAM-5, SPC-4, SBC-3 (the Block Limits page of 0x3C octets,
// Logical Block Provisioning and GET LBA STATUS are SBC-3's) and iSCSI.
var versionDescriptors = [...]uint16{0x00a0, 0x0460, 0x04c0, 0x0960}

// standardInquiry appends the standard INQUIRY data (SPC-4 6.6.2), 96
// octets through the reserved octets 74 to 95, so ADDITIONAL LENGTH is 91
// (it counts the octets after octet 4: n-4 for data of octets 0 to n).
// VERSION is 06h, SPC-4, which the VPD pages and version descriptors
// imply; RESPONSE DATA FORMAT 2 with HISUP (LUNs are SAM hierarchical);
// CMDQUE, since the target queues commands. TPGS is 01b (implicit ALUA)
// when the target has port groups (SetPortGroups), which serves REPORT
// TARGET PORT GROUPS, else 00b (gotgt claimed implicit ALUA regardless). Vendor, product and revision are
// gotgt's, as before, in ASCII padded with spaces (SPC-4 4.4.1).
func standardInquiry(b []byte, cmd *api.SCSICommand) []byte {
	const (
		spc4    = 0x06
		hisup   = 0x10
		format2 = 0x02
		cmdque  = 0x02
	)
	hdr := vpdHeader(b, cmd)[:1] // peripheral qualifier and device type
	var tpgs byte
	if aluaEnabled(cmd) {
		tpgs = 0x10 // TPGS 01b: implicit ALUA (alua.go)
	}
	b = append(hdr, 0, spc4, hisup|format2, 91, tpgs, 0, cmdque)
	b = appendASCII(b, cmd.Device.Attrs.VendorID, 8)
	b = appendASCII(b, cmd.Device.Attrs.ProductID, 16)
	b = appendASCII(b, cmd.Device.Attrs.ProductRev, 4)
	b = append(b, make([]byte, 20+2)...) // vendor specific; octets 56, 57
	for _, v := range versionDescriptors {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return append(b, make([]byte, 96-len(b))...)
}

// appendASCII appends s in a field of n octets, cut or padded with spaces.
func appendASCII(b []byte, s string, n int) []byte {
	b = append(b, s[:min(len(s), n)]...)
	for range n - min(len(s), n) {
		b = append(b, ' ')
	}
	return b
}

// unitSerialNumber appends the Unit Serial Number page (SPC-4 7.8.15):
// the PRODUCT SERIAL NUMBER gotgt has always given, "gotgt-" and the LU's
// id, padded with spaces to 36 octets, kept as it was so that hosts that
// name disks by it see the same names.
func unitSerialNumber(b []byte, cmd *api.SCSICommand) []byte {
	return appendASCII(b, fmt.Sprintf("gotgt-%d", cmd.Device.UUID), 36)
}

// vpdHeader appends the four octets that start every VPD page: peripheral
// qualifier and device type (qualifier 001b for the stand-in LUN 0, as
// gotgt's standard data has it), page code, and room for the page length.
func vpdHeader(b []byte, cmd *api.SCSICommand) []byte {
	pq := byte(0)
	if !cmd.Device.Attrs.Online {
		pq = 1 << 5
	}
	return append(b, pq|byte(cmd.Device.Attrs.DeviceType)&0x1f, cmd.SCB[2], 0, 0)
}

// deviceIdentification appends the designation descriptors of the Device
// Identification page (SPC-4 7.8.6): the LU's NAA locally assigned
// identifier (absent for the stand-in LUN 0), then, for the target port the
// command came through, its relative target port identifier, its target
// port group, its SCSI name ("<target>,t,0x0001") and the target device's
// SCSI name (the iSCSI target name).
func deviceIdentification(b []byte, cmd *api.SCSICommand, l *LU) []byte {
	const (
		iSCSI   = 0x5 << 4 // PROTOCOL IDENTIFIER
		binCode = 0x1      // CODE SET
		utf8    = 0x3
		piv     = 0x80
		port    = 0x1 << 4 // ASSOCIATION
		device  = 0x2 << 4
		naa     = 0x3 // DESIGNATOR TYPE
		relPort = 0x4
		tpg     = 0x5
		name    = 0x8
	)
	if l != nil {
		b = append(b, binCode, naa, 0, 8)
		b = binary.BigEndian.AppendUint64(b, 0x3<<60|l.id&(1<<60-1)) // NAA 3h: locally assigned
	}
	if cmd.Target == nil {
		return b
	}
	id := cmd.RelTargetPortID
	group := gscsi.FindTargetGroup(cmd.Target, id)
	b = append(b, iSCSI|binCode, piv|port|relPort, 0, 4, 0, 0, byte(id>>8), byte(id))
	b = append(b, iSCSI|binCode, piv|port|tpg, 0, 4, 0, 0, byte(group>>8), byte(group))
	b = appendSCSIName(b, iSCSI|utf8, piv|port|name, fmt.Sprintf("%s,t,0x%04x", cmd.Target.Name, portalGroupTag))
	return appendSCSIName(b, iSCSI|utf8, piv|device|name, cmd.Target.Name)
}

// appendSCSIName appends a SCSI name string designator (SPC-4 7.8.6.11):
// the name in UTF-8, null-terminated and null-padded to a multiple of four
// octets, cut to the 255 octets a designator holds (iSCSI names have at
// most 223).
func appendSCSIName(b []byte, code, kind byte, s string) []byte {
	n := min(len(s)+1+3, 252) &^ 3
	b = append(b, code, kind, 0, byte(n))
	start := len(b)
	b = append(b, s[:min(len(s), n-1)]...)
	for len(b) < start+n {
		b = append(b, 0)
	}
	return b
}

// blockLimits appends the Block Limits page (SBC-3 6.5.3): WSNZ, the
// MAXIMUM COMPARE AND WRITE LENGTH (octet 5, one octet), an OPTIMAL
// TRANSFER LENGTH GRANULARITY of one page (the page cache's unit; see
// readCapacity16), and, on a thin LU, the UNMAP limits and a granularity
// of one page; the MAXIMUM WRITE SAME LENGTH. Transfer lengths are not
// reported (0): the transport bounds them.
func blockLimits(b []byte, l *LU) []byte {
	b = append(b, make([]byte, 60)...)
	p := b[4:]  // p[i] is octet 4+i of the page
	p[0] = 0x01 // WSNZ: a WRITE SAME of 0 blocks is refused
	p[1] = maxCompareAndWrite
	binary.BigEndian.PutUint16(p[2:], uint16(pageSize/512))
	if l != nil && l.Thin() {
		binary.BigEndian.PutUint32(p[16:], maxUnmapBlocks)
		binary.BigEndian.PutUint32(p[20:], maxUnmapDescriptors)
		binary.BigEndian.PutUint32(p[24:], uint32(pageSize/512)) // OPTIMAL UNMAP GRANULARITY
		binary.BigEndian.PutUint32(p[28:], 0x80000000)           // UGAVALID, alignment 0
	}
	binary.BigEndian.PutUint64(p[32:], maxWriteSame)
	return b
}

// blockDeviceCharacteristics appends the Block Device Characteristics
// page (SBC-3 6.5.2), of PAGE LENGTH 003Ch: MEDIUM ROTATION RATE 0001h,
// a non-rotating medium (memory, or a file whose blocks the page cache
// serves), and NOMINAL FORM FACTOR 0, not reported; the rest is reserved
// or, in SBC-4, zero for "not reported".
func blockDeviceCharacteristics(b []byte) []byte {
	b = append(b, make([]byte, 60)...)
	p := b[len(b)-60:] // p[i] is octet 4+i of the page
	p[1] = 0x01        // octets 4 and 5: MEDIUM ROTATION RATE
	return b
}

// provisioning appends the Logical Block Provisioning page (SBC-3 6.5.4):
// on a thin LU, UNMAP (LBPU) and WRITE SAME(16) and (10) with UNMAP (LBPWS,
// LBPWS10) are supported, discarded blocks read zeros (LBPRZ) and the
// provisioning type is thin; otherwise all zero.
func provisioning(b []byte, l *LU) []byte {
	if l != nil && l.Thin() {
		return append(b, 0, 0x80|0x40|0x20|0x04, 0x02, 0)
	}
	return append(b, 0, 0, 0, 0)
}
