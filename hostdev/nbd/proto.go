package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The NBD transmission phase (the protocol's doc/proto.md, "Transmission"),
// as the kernel's client speaks it once it has been handed a connected
// socket: fixed-size requests, each followed by its payload for a write,
// and simple replies, a read's data following its reply header. Every
// field is big-endian. These functions only encode and decode byte slices.

// Magic numbers.
const (
	RequestMagic     = 0x25609513
	SimpleReplyMagic = 0x67446698
)

// Sizes of the headers.
const (
	RequestLen     = 28 // magic 4, flags 2, type 2, handle 8, offset 8, length 4
	SimpleReplyLen = 16 // magic 4, error 4, handle 8
)

// Command types.
const (
	CmdRead        = 0
	CmdWrite       = 1
	CmdDisc        = 2
	CmdFlush       = 3
	CmdTrim        = 4
	CmdCache       = 5
	CmdWriteZeroes = 6
)

// Command flags.
const (
	CmdFlagFUA    = 1 << 0
	CmdFlagNoHole = 1 << 1
)

// Transmission flags, which the server advertises (over netlink, here:
// NBD_ATTR_SERVER_FLAGS).
const (
	FlagHasFlags        = 1 << 0
	FlagReadOnly        = 1 << 1
	FlagSendFlush       = 1 << 2
	FlagSendFUA         = 1 << 3
	FlagRotational      = 1 << 4
	FlagSendTrim        = 1 << 5
	FlagSendWriteZeroes = 1 << 6
	FlagCanMultiConn    = 1 << 8
)

// Error values of a reply. They are the protocol's own, which are Linux's
// errno numbers.
const (
	EPERM     = 1
	EIO       = 5
	ENOMEM    = 12
	EINVAL    = 22
	ENOSPC    = 28
	EOVERFLOW = 75
	ENOTSUP   = 95
	ESHUTDOWN = 108
)

// Request is a decoded request header.
type Request struct {
	Flags  uint16
	Type   uint16
	Handle uint64
	Offset uint64
	Length uint32
}

// Decoding errors.
var (
	ErrShort    = errors.New("nbd: header too short")
	ErrBadMagic = errors.New("nbd: bad magic")
)

// ParseRequest decodes a request header from the first RequestLen octets
// of b. It checks the magic only: what the command and its range mean is
// the server's to judge.
func ParseRequest(b []byte) (Request, error) {
	if len(b) < RequestLen {
		return Request{}, ErrShort
	}
	if m := binary.BigEndian.Uint32(b); m != RequestMagic {
		return Request{}, fmt.Errorf("%w %#08x in a request", ErrBadMagic, m)
	}
	return Request{
		Flags:  binary.BigEndian.Uint16(b[4:]),
		Type:   binary.BigEndian.Uint16(b[6:]),
		Handle: binary.BigEndian.Uint64(b[8:]),
		Offset: binary.BigEndian.Uint64(b[16:]),
		Length: binary.BigEndian.Uint32(b[24:]),
	}, nil
}

// Encode writes the request header into b[:RequestLen] (what a client
// sends; the tests play the kernel with it).
func (r Request) Encode(b []byte) []byte {
	b = b[:RequestLen]
	binary.BigEndian.PutUint32(b, RequestMagic)
	binary.BigEndian.PutUint16(b[4:], r.Flags)
	binary.BigEndian.PutUint16(b[6:], r.Type)
	binary.BigEndian.PutUint64(b[8:], r.Handle)
	binary.BigEndian.PutUint64(b[16:], r.Offset)
	binary.BigEndian.PutUint32(b[24:], r.Length)
	return b
}

// HasPayload says whether the request is followed by Length octets of data.
func (r Request) HasPayload() bool { return r.Type == CmdWrite }

// Reply is a decoded simple reply header.
type Reply struct {
	Error  uint32
	Handle uint64
}

// Encode writes the simple reply header into b[:SimpleReplyLen].
func (r Reply) Encode(b []byte) []byte {
	b = b[:SimpleReplyLen]
	binary.BigEndian.PutUint32(b, SimpleReplyMagic)
	binary.BigEndian.PutUint32(b[4:], r.Error)
	binary.BigEndian.PutUint64(b[8:], r.Handle)
	return b
}

// ParseReply decodes a simple reply header.
func ParseReply(b []byte) (Reply, error) {
	if len(b) < SimpleReplyLen {
		return Reply{}, ErrShort
	}
	if m := binary.BigEndian.Uint32(b); m != SimpleReplyMagic {
		return Reply{}, fmt.Errorf("%w %#08x in a reply", ErrBadMagic, m)
	}
	return Reply{Error: binary.BigEndian.Uint32(b[4:]), Handle: binary.BigEndian.Uint64(b[8:])}, nil
}

// CmdName names a command type for logs.
func CmdName(t uint16) string {
	switch t {
	case CmdRead:
		return "READ"
	case CmdWrite:
		return "WRITE"
	case CmdDisc:
		return "DISC"
	case CmdFlush:
		return "FLUSH"
	case CmdTrim:
		return "TRIM"
	case CmdCache:
		return "CACHE"
	case CmdWriteZeroes:
		return "WRITE_ZEROES"
	}
	return fmt.Sprintf("command %d", t)
}
