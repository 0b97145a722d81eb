package initiator

import (
	"errors"
	"time"

	"github.com/ddpstore/ddpstore/transport/login"
)

// transport is what the session core needs of one connection: a carrier of
// iSCSI PDUs that also describes, and moves, the data of commands. The
// core owns what iSCSI says about a session (login, the CmdSN window, the
// task records, NOP, task management, text, logout, reconnection and
// reissue); a transport owns how PDUs and data travel.
//
// iser.go implements it over the RNIC (RFC 7145: PDUs in Sends, the data
// buffers named by an STag that the target reads and writes by RDMA).
// iSCSI over TCP (RFC 7143: Data-In, R2T, Data-Out) is the second
// implementation; it adds files beside iser.go.
//
// Send buffers are the task records': slot i belongs to task i.
type transport interface {
	// loginConfig adjusts the login for this transport: its mode and the
	// keys it offers.
	loginConfig(ic *login.InitiatorConfig)
	// negotiated is told the login's outcome and returns the most
	// immediate data a write may carry.
	negotiated(p login.Params) int
	// sendBuf is slot's send buffer from the first octet of its BHS.
	sendBuf(slot int) []byte
	// command describes a SCSI command's data buffer, octets [off,
	// off+edtl) of the session's buffer region, imm of them sent as
	// immediate data, in slot's next PDU.
	// It fails only when the buffer cannot be described (no resources).
	command(slot int, dir Direction, off int, edtl uint32, imm int) error
	// release ends the target's access to slot's buffer when its
	// command's answer is in (s.mu held, on the loop's goroutine): a
	// later touch of it is refused (a Terminate, an error).
	release(slot int)
	// settle waits, up to d, until nothing is being placed into or sent
	// from slot's buffer any more, access to it ended; s.mu not held.
	// After it returns nil the buffer is the caller's.
	settle(slot int, d time.Duration) error
	// postPDU sends the n octets of sendBuf(slot) as one PDU; the
	// transport calls Session.sent(slot) when the buffer is free again.
	postPDU(slot, n int) error
	// awaitAnswer says that the session will wait for the answer to what
	// it posts next, with nothing else outstanding: a receiver that would
	// sleep polls for it instead (iwarp.QP.AwaitAnswer).
	awaitAnswer()
	// run delivers what arrives (Session.received, sent, idle) until the
	// connection fails or wake is closed (errStopped).
	run(wake <-chan bool, tick <-chan time.Time) error
	// abort ends the connection at once; err is why it failed.
	abort()
	err() error
	// close releases the connection's resources once run has returned.
	close() error
}

// errStopped: the session stopped the connection's loop.
var errStopped = errors.New("initiator: connection stopped")
