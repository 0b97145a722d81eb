package initiator

import "time"

// Observer is told what the session does, for metrics. Its methods are
// called on the callers' and the session's goroutines, on the data path:
// they must not block and should not allocate. A nil Config.Observer
// observes nothing.
type Observer interface {
	// Command: a SCSI command was answered (whatever its status).
	Command(c CommandInfo)
	// ConnectionLost: the session's connection failed; Reconnected: the
	// session logged in again on a new one and reissued its commands.
	ConnectionLost()
	Reconnected()
}

// CommandInfo describes one answered SCSI command.
type CommandInfo struct {
	LUN    uint16
	Opcode byte // the CDB's first octet
	Status byte // the SAM status
	// DataIn and DataOut are the octets the command asked to move from and
	// to the target (its expected data transfer length, by direction).
	DataIn, DataOut uint32
	// Latency runs from Do's call to the answer.
	Latency time.Duration
}
