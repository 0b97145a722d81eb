package iwarp

import (
	"errors"
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// MaxSGE is the most scatter/gather elements a work request may carry.
const MaxSGE = 4

// Opcode is the operation of a send-queue work request.
type Opcode uint8

const (
	// OpSend sends the SGL's octets into the peer's next posted receive.
	OpSend Opcode = iota
	// OpSendSE is a Send with Solicited Event: it wakes a peer waiting for
	// solicited completions.
	OpSendSE
	// OpSendInv is a Send with Invalidate: after placing the message the
	// peer invalidates InvalidateSTag.
	OpSendInv
	// OpSendSEInv is a Send with Solicited Event and Invalidate.
	OpSendSEInv
	// OpWrite places the SGL's octets into the peer's buffer RemoteSTag at
	// RemoteTO, with no completion at the peer.
	OpWrite
	// OpRead fetches SGL[0].Len octets from the peer's buffer RemoteSTag at
	// RemoteTO into SGL[0], which must allow remote write (as iWARP
	// requires of an RDMA Read's Data Sink).
	OpRead
)

func (o Opcode) String() string {
	switch o {
	case OpSend:
		return "Send"
	case OpSendSE:
		return "Send with Solicited Event"
	case OpSendInv:
		return "Send with Invalidate"
	case OpSendSEInv:
		return "Send with Solicited Event and Invalidate"
	case OpWrite:
		return "RDMA Write"
	case OpRead:
		return "RDMA Read"
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// wcOpcode returns the completion opcode of a work request of opcode o.
func (o Opcode) wcOpcode() WCOpcode {
	switch o {
	case OpWrite:
		return WCWrite
	case OpRead:
		return WCRead
	}
	return WCSend
}

// SGE is a scatter/gather element: Len octets at TO of a local memory region
// named by its STag (the verbs lkey and address).
type SGE struct {
	STag mem.STag
	TO   uint64
	Len  uint32
}

// SGEOf returns the SGE for n octets at offset off of mr.
func SGEOf(mr *mem.MR, off, n int) SGE {
	return SGE{STag: mr.STag(), TO: mr.BaseTO() + uint64(off), Len: uint32(n)}
}

// SendWR is a send-queue work request. PostSend copies it; the SGL's memory
// must stay registered and unchanged until the request completes.
type SendWR struct {
	ID  uint64
	Op  Opcode
	SGL []SGE
	// RemoteSTag and RemoteTO name the peer's buffer (OpWrite, OpRead).
	RemoteSTag mem.STag
	RemoteTO   uint64
	// InvalidateSTag is the peer's STag that OpSendInv and OpSendSEInv
	// invalidate.
	InvalidateSTag mem.STag
	// Quiet queues the request's successful completion without waking the
	// CQ's waiters or its armed notification: the consumer polls it with
	// the next completion that does wake it. For a request whose answer
	// follows (an iSCSI command's Send) on a QP whose send and receive CQ
	// are one, so that its completion does not wake the consumer once
	// before the answer does. It wakes as usual when it fails, when the
	// CQs differ, or when a completion came into the CQ while it was
	// being sent: that may be the answer, which the consumer may have
	// handled already.
	Quiet bool
}

// RecvWR is a receive-queue work request: a buffer for one incoming Send.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCOpcode says what a work completion completed.
type WCOpcode uint8

const (
	WCSend WCOpcode = iota
	WCWrite
	WCRead
	WCRecv
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "Send"
	case WCWrite:
		return "RDMA Write"
	case WCRead:
		return "RDMA Read"
	case WCRecv:
		return "Receive"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// Status is the outcome of a work request.
type Status uint8

const (
	// StatusSuccess: the request completed.
	StatusSuccess Status = iota
	// StatusFlushed: the QP left the connected state (error, teardown or
	// Close) before the request completed; nothing is known of its data.
	StatusFlushed
	// StatusLocalProtection: an SGE names an STag that is not valid for
	// this QP's protection domain, lacks the access the operation needs, or
	// lies outside its region.
	StatusLocalProtection
	// StatusLocalLength: an incoming Send was longer than the posted
	// receive, or an RDMA Read Response did not match its request.
	StatusLocalLength
	// StatusRemoteAccess: the peer answered this request with a Terminate
	// reporting a protection error (bad STag, bounds, rights).
	StatusRemoteAccess
	// StatusRemoteOperation: the peer answered with a Terminate reporting
	// any other error.
	StatusRemoteOperation
	// StatusTransport: the connection failed under the request: TCP lost,
	// an MPA CRC or Marker error.
	StatusTransport
	// StatusInvalidate: a Send with Invalidate named an STag this end could
	// not invalidate.
	StatusInvalidate
)

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusFlushed:
		return "flushed"
	case StatusLocalProtection:
		return "local protection error"
	case StatusLocalLength:
		return "local length error"
	case StatusRemoteAccess:
		return "remote access error"
	case StatusRemoteOperation:
		return "remote operation error"
	case StatusTransport:
		return "transport error"
	case StatusInvalidate:
		return "invalidate error"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// WC is a work completion.
type WC struct {
	WRID    uint64
	Status  Status
	Op      WCOpcode
	ByteLen uint32
	QPN     uint32
	// Invalidated is the STag a received Send with Invalidate invalidated
	// (WCRecv only), or 0.
	Invalidated mem.STag
	// Solicited: the received Send asked for a Solicited Event.
	Solicited bool
}

// Errors returned by the verbs calls.
var (
	ErrQueueFull   = errors.New("iwarp: work queue full")
	ErrQPState     = errors.New("iwarp: queue pair is not in a state that allows this")
	ErrTooManySGE  = fmt.Errorf("iwarp: more than %d SGEs", MaxSGE)
	ErrReadSGE     = errors.New("iwarp: an RDMA Read takes exactly one SGE (its Data Sink)")
	ErrClosed      = errors.New("iwarp: closed")
	ErrMessageSize = errors.New("iwarp: message longer than 2^32-1 octets")
)
