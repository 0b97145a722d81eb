package lu

import (
	"encoding/binary"
	"fmt"

	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// portalGroupTag is the Target Portal Group Tag the transport's targets
// log in with (transport/target); a target port's SCSI name is the target
// name, ",t,0x" and the tag in hexadecimal (RFC 7143's iSCSI target port
// name, from memory; Linux's LIO prints it the same way).
const portalGroupTag = 1

// inquiry answers INQUIRY (SPC-4 6.6). The standard data and the Unit
// Serial Number page (0x80) are gotgt's; the vital product data pages
// that describe what this package implements are built here from the LU:
// Supported VPD Pages (0x00), Device Identification (0x83, gotgt's
// dereferences the target port it looks up), Block Limits (0xB0) and
// Logical Block Provisioning (0xB2). Thin provisioning in B0, B2 and
// READ CAPACITY(16) all come from LU.Thin.
func inquiry(host int, cmd *api.SCSICommand) api.SAMStat {
	scb := cmd.SCB
	if scb[1]&0x01 == 0 || cmd.Device == nil { // standard data
		return gscsi.SPCInquiry(host, cmd)
	}
	var buf [512]byte
	var page []byte
	l := luOf(cmd)
	switch scb[2] {
	case 0x00:
		page = append(vpdHeader(buf[:0], cmd), 0x00, 0x80, 0x83, 0xb0, 0xb2)
	case 0x83:
		page = deviceIdentification(vpdHeader(buf[:0], cmd), cmd, l)
	case 0xb0:
		page = blockLimits(vpdHeader(buf[:0], cmd), l)
	case 0xb2:
		page = provisioning(vpdHeader(buf[:0], cmd), l)
	default:
		return gscsi.SPCInquiry(host, cmd)
	}
	binary.BigEndian.PutUint16(page[2:], uint16(len(page)-4))
	alloc := int(binary.BigEndian.Uint16(scb[3:]))
	in := cmd.InSDBBuffer.Buffer
	cmd.InSDBBuffer.Resid = uint32(copy(in[:min(alloc, len(in))], page))
	return api.SAMStatGood
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
// MAXIMUM COMPARE AND WRITE LENGTH, and, on a thin LU, the UNMAP limits
// and a granularity of one page; the MAXIMUM WRITE SAME LENGTH. Transfer
// lengths are not reported (0): the transport bounds them.
func blockLimits(b []byte, l *LU) []byte {
	b = append(b, make([]byte, 60)...)
	p := b[4:]  // p[i] is octet 4+i of the page
	p[0] = 0x01 // WSNZ: a WRITE SAME of 0 blocks is refused
	p[1] = maxCompareAndWrite
	if l != nil && l.Thin() {
		binary.BigEndian.PutUint32(p[16:], maxUnmapBlocks)
		binary.BigEndian.PutUint32(p[20:], maxUnmapDescriptors)
		binary.BigEndian.PutUint32(p[24:], uint32(pageSize/512)) // OPTIMAL UNMAP GRANULARITY
		binary.BigEndian.PutUint32(p[28:], 0x80000000)           // UGAVALID, alignment 0
	}
	binary.BigEndian.PutUint64(p[32:], maxWriteSame)
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
