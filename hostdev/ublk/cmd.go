package ublk

import (
	"encoding/binary"
	"fmt"
)

// ublk's user-kernel interface (include/uapi/linux/ublk_cmd.h as of
// Linux 6.1): the control commands sent as URING_CMDs to
// /dev/ublk-control, the I/O commands sent to /dev/ublkcN, and the
// structures they carry, encoded and decoded here as byte slices in the
// machine's order. Linux 6.1 takes the plain command numbers; later
// kernels also take ioctl-encoded ones and still accept these.

// Control commands.
const (
	CmdGetDevInfo        = 0x02
	CmdAddDev            = 0x04
	CmdDelDev            = 0x05
	CmdStartDev          = 0x06
	CmdStopDev           = 0x07
	CmdSetParams         = 0x08
	CmdGetParams         = 0x09
	CmdStartUserRecovery = 0x10
	CmdEndUserRecovery   = 0x11
)

// I/O commands and their results.
const (
	IOFetchReq          = 0x20
	IOCommitAndFetchReq = 0x21

	IOResOK    = 0
	IOResAbort = -19 // -ENODEV: the queue is being torn down
)

// Operations of an I/O descriptor, and its flags.
const (
	OpRead        = 0
	OpWrite       = 1
	OpFlush       = 2
	OpDiscard     = 3
	OpWriteSame   = 4
	OpWriteZeroes = 5

	IOFlagFUA     = 1 << 13
	IOFlagNoUnmap = 1 << 15
)

// Device flags (features).
const (
	FlagURingCmdCompInTask  = 1 << 1
	FlagUserRecovery        = 1 << 3
	FlagUserRecoveryReissue = 1 << 4
)

// Parameters.
const (
	ParamTypeBasic   = 1 << 0
	ParamTypeDiscard = 1 << 1

	AttrReadOnly      = 1 << 0
	AttrVolatileCache = 1 << 2
	AttrFUA           = 1 << 3
)

// Limits.
const (
	MaxQueueDepth = 4096
	descLen       = 24 // struct ublksrv_io_desc
	// CmdBufOffset is where queue q's descriptors are mmap'd from
	// /dev/ublkcN: q times the space of MaxQueueDepth descriptors.
	cmdBufStride = MaxQueueDepth * descLen
)

var ne = binary.NativeEndian

// CtrlCmd is struct ublksrv_ctrl_cmd (32 octets).
type CtrlCmd struct {
	DevID   uint32
	QueueID uint16 // 0xffff when the command is for no queue
	Len     uint16
	Addr    uint64
	Data    [2]uint64
}

// CtrlCmdLen is the size of CtrlCmd on the wire.
const CtrlCmdLen = 32

// Encode writes the command into b[:CtrlCmdLen].
func (c CtrlCmd) Encode(b []byte) []byte {
	b = b[:CtrlCmdLen]
	ne.PutUint32(b[0:], c.DevID)
	ne.PutUint16(b[4:], c.QueueID)
	ne.PutUint16(b[6:], c.Len)
	ne.PutUint64(b[8:], c.Addr)
	ne.PutUint64(b[16:], c.Data[0])
	ne.PutUint64(b[24:], c.Data[1])
	return b
}

// DevInfo is struct ublksrv_ctrl_dev_info (64 octets).
type DevInfo struct {
	NrHWQueues    uint16
	QueueDepth    uint16
	State         uint16
	MaxIOBufBytes uint32
	DevID         uint32
	SrvPID        int32
	Flags         uint64
}

// DevInfoLen is the size of DevInfo on the wire.
const DevInfoLen = 64

// Encode writes the information into b[:DevInfoLen].
func (d DevInfo) Encode(b []byte) []byte {
	b = b[:DevInfoLen]
	clear(b)
	ne.PutUint16(b[0:], d.NrHWQueues)
	ne.PutUint16(b[2:], d.QueueDepth)
	ne.PutUint16(b[4:], d.State)
	ne.PutUint32(b[8:], d.MaxIOBufBytes)
	ne.PutUint32(b[12:], d.DevID)
	ne.PutUint32(b[16:], uint32(d.SrvPID))
	ne.PutUint64(b[24:], d.Flags)
	return b
}

// ParseDevInfo decodes what the kernel wrote back.
func ParseDevInfo(b []byte) (DevInfo, error) {
	if len(b) < DevInfoLen {
		return DevInfo{}, fmt.Errorf("ublk: device information of %d octets", len(b))
	}
	return DevInfo{
		NrHWQueues:    ne.Uint16(b[0:]),
		QueueDepth:    ne.Uint16(b[2:]),
		State:         ne.Uint16(b[4:]),
		MaxIOBufBytes: ne.Uint32(b[8:]),
		DevID:         ne.Uint32(b[12:]),
		SrvPID:        int32(ne.Uint32(b[16:])),
		Flags:         ne.Uint64(b[24:]),
	}, nil
}

// Params is struct ublk_params with its basic and discard parts.
type Params struct {
	Types uint32
	// basic
	Attrs                                       uint32
	LogicalBSShift, PhysicalBSShift, IOOptShift uint8
	IOMinShift                                  uint8
	MaxSectors, ChunkSectors                    uint32
	DevSectors, VirtBoundaryMask                uint64
	// discard
	DiscardAlignment, DiscardGranularity     uint32
	MaxDiscardSectors, MaxWriteZeroesSectors uint32
	MaxDiscardSegments                       uint16
}

// ParamsLen is sizeof(struct ublk_params) in Linux 6.1.
const ParamsLen = 64

// Encode writes the parameters into b[:ParamsLen], its length field set.
func (p Params) Encode(b []byte) []byte {
	b = b[:ParamsLen]
	clear(b)
	ne.PutUint32(b[0:], ParamsLen)
	ne.PutUint32(b[4:], p.Types)
	ne.PutUint32(b[8:], p.Attrs)
	b[12], b[13], b[14], b[15] = p.LogicalBSShift, p.PhysicalBSShift, p.IOOptShift, p.IOMinShift
	ne.PutUint32(b[16:], p.MaxSectors)
	ne.PutUint32(b[20:], p.ChunkSectors)
	ne.PutUint64(b[24:], p.DevSectors)
	ne.PutUint64(b[32:], p.VirtBoundaryMask)
	ne.PutUint32(b[40:], p.DiscardAlignment)
	ne.PutUint32(b[44:], p.DiscardGranularity)
	ne.PutUint32(b[48:], p.MaxDiscardSectors)
	ne.PutUint32(b[52:], p.MaxWriteZeroesSectors)
	ne.PutUint16(b[56:], p.MaxDiscardSegments)
	return b
}

// ParseParams decodes parameters the kernel wrote back (GET_PARAMS).
func ParseParams(b []byte) (Params, error) {
	if len(b) < ParamsLen {
		return Params{}, fmt.Errorf("ublk: parameters of %d octets", len(b))
	}
	return Params{
		Types: ne.Uint32(b[4:]), Attrs: ne.Uint32(b[8:]),
		LogicalBSShift: b[12], PhysicalBSShift: b[13], IOOptShift: b[14], IOMinShift: b[15],
		MaxSectors: ne.Uint32(b[16:]), ChunkSectors: ne.Uint32(b[20:]),
		DevSectors: ne.Uint64(b[24:]), VirtBoundaryMask: ne.Uint64(b[32:]),
		DiscardAlignment: ne.Uint32(b[40:]), DiscardGranularity: ne.Uint32(b[44:]),
		MaxDiscardSectors: ne.Uint32(b[48:]), MaxWriteZeroesSectors: ne.Uint32(b[52:]),
		MaxDiscardSegments: ne.Uint16(b[56:]),
	}, nil
}

// IOCmd is struct ublksrv_io_cmd (16 octets).
type IOCmd struct {
	QueueID uint16
	Tag     uint16
	Result  int32
	Addr    uint64
}

// IOCmdLen is the size of IOCmd on the wire.
const IOCmdLen = 16

// Encode writes the command into b[:IOCmdLen].
func (c IOCmd) Encode(b []byte) []byte {
	b = b[:IOCmdLen]
	ne.PutUint16(b[0:], c.QueueID)
	ne.PutUint16(b[2:], c.Tag)
	ne.PutUint32(b[4:], uint32(c.Result))
	ne.PutUint64(b[8:], c.Addr)
	return b
}

// IODesc is struct ublksrv_io_desc: a request the kernel hands over.
type IODesc struct {
	OpFlags     uint32
	NrSectors   uint32
	StartSector uint64
	Addr        uint64
}

// Op is the descriptor's operation; Flags the rest of its op_flags.
func (d IODesc) Op() uint8     { return uint8(d.OpFlags) }
func (d IODesc) Flags() uint32 { return d.OpFlags &^ 0xff }

// ParseIODesc decodes a descriptor.
func ParseIODesc(b []byte) (IODesc, error) {
	if len(b) < descLen {
		return IODesc{}, fmt.Errorf("ublk: I/O descriptor of %d octets", len(b))
	}
	return IODesc{OpFlags: ne.Uint32(b[0:]), NrSectors: ne.Uint32(b[4:]), StartSector: ne.Uint64(b[8:]), Addr: ne.Uint64(b[16:])}, nil
}

// OpName names an operation for logs.
func OpName(op uint8) string {
	switch op {
	case OpRead:
		return "READ"
	case OpWrite:
		return "WRITE"
	case OpFlush:
		return "FLUSH"
	case OpDiscard:
		return "DISCARD"
	case OpWriteSame:
		return "WRITE_SAME"
	case OpWriteZeroes:
		return "WRITE_ZEROES"
	}
	return fmt.Sprintf("op %d", op)
}
