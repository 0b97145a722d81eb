package target

import "time"

// Observer is told what the target does, for metrics. Its methods are
// called on the connections' goroutines, on the data path: they must not
// block and should not allocate. A nil Config.Observer observes nothing.
type Observer interface {
	// Connection: a connection was accepted (+1) or has ended (-1).
	Connection(delta int)
	// Session: a connection entered full feature phase (+1) or a session
	// in it ended (-1); kind is "Normal" or "Discovery".
	Session(kind string, delta int)
	// Command: a SCSI command was answered.
	Command(c CommandInfo)
	// Rejected: a PDU was answered with a Reject carrying reason (RFC 7143
	// section 11.17.1), or a connection was dropped for a protocol error
	// (reason 0).
	Rejected(reason uint8)
}

// CommandInfo describes one answered SCSI command.
type CommandInfo struct {
	Target string // the target's IQN
	LUN    uint64
	Opcode byte // the CDB's first octet
	Status byte // the SAM status answered
	// DataIn and DataOut are the octets moved to and from the initiator.
	DataIn, DataOut uint32
	// Latency runs from the command's arrival to the post of its response.
	Latency time.Duration
}

// SessionInfo is one connection as Server.SessionList shows it.
type SessionInfo struct {
	Peer      string // the initiator's address
	Transport string // "iser" or "iscsi-tcp"
	// Set once the connection is in full feature phase; empty before.
	Initiator, Target, Kind string
	TSIH                    uint16
	Since                   time.Time // when the connection was accepted
	// Params is what the login negotiated (zero before).
	Params SessionParams
	// Commands answered, and octets of data moved to (Read) and from
	// (Written) the initiator, so far.
	Commands, ReadBytes, WrittenBytes uint64
	// PlacedBytes are the octets of WrittenBytes that the transport
	// placed straight into the store (lu.Placement), not through staging.
	PlacedBytes uint64
}

// SessionParams are the negotiated operational parameters an operator
// looks at (RFC 7143 section 13, RFC 7145 section 6).
type SessionParams struct {
	QueueDepth                       uint32 // the CmdSN window the target opens
	MaxRecvDataSegmentLength         uint32 // the largest data segment the initiator receives
	FirstBurstLength, MaxBurstLength uint32
	ImmediateData, InitialR2T        bool
	HeaderDigest, DataDigest         bool // CRC32C (iSCSI/TCP only)
}
