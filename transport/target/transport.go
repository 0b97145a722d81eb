package target

import (
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
)

// transport is what a connection's session core (conn) needs of the wire
// under it: a carrier of iSCSI PDUs that also moves the data of commands.
// The core owns everything iSCSI says about a session (login, the CmdSN
// window, the task table, SCSI execution, task management, NOP, text,
// logout, reload); a transport owns how PDUs and data travel.
//
// iser.go implements it over the RNIC (RFC 7145: each PDU in a Send, read
// data by RDMA Write, write data by RDMA Read). iSCSI over TCP (RFC 7143:
// Data-In, R2T and Data-Out PDUs) is the second implementation; it adds
// files beside iser.go and changes nothing in the core.
//
// Every method runs on the connection's goroutine, as do the core's entry
// points the transport calls: pdu, sent, fetched and idle.
type transport interface {
	// name is the transport's name in logs and SessionInfo.
	name() string
	// loginConfig adjusts the login for this transport: the mode
	// (Traditional or iSER) and the keys it offers.
	loginConfig(tc *login.TargetConfig)
	// negotiated is told the parameters the login settled on.
	negotiated(p login.Params)

	// sendSlots is the number of PDU send buffers; sendBuf(slot) is one,
	// from the first octet of its BHS, with room for the largest data
	// segment the target sends.
	sendSlots() int
	sendBuf(slot int) []byte
	// growSend returns sendBuf(slot) with room for a data segment of n
	// octets, for the one PDU about to be posted from it. Over iSER no
	// data segment the target owes exceeds the buffers' size.
	growSend(slot, n int) []byte
	// room reports whether n more operations (PDUs or data transfers) can
	// be posted now. The transport gets it back by calling sent or fetched,
	// or on its own completion of a data transfer.
	room(n int) bool
	// postPDU sends the n octets of sendBuf(slot) as one PDU and calls
	// sent(slot) when the buffer is free again. ti is the task whose SCSI
	// Response this is, or -1: with the response the transport ends the
	// task's access to the initiator's buffers.
	postPDU(slot, n int, ti int32) error

	// command binds task ti to the SCSI Command PDU being delivered (with
	// imm octets of immediate data); false rejects the command's data
	// description as a protocol error.
	command(ti int32, cmd iscsi.SCSICommand, imm int) bool
	// fetch asks for octets [off, off+n) of task ti's write data, into
	// dst: the staging, or, for a task with a placement (placesWrites),
	// the LU's store. The transport calls fetched(ti, ok) when they are in.
	fetch(ti int32, dst dataRef, off, n uint32) error
	// placesWrites reports whether fetch can place write data straight
	// into an LU's store (lu.Placement).
	placesWrites() bool
	// endPlacement is told that task ti's placement ends: no fetch of it
	// is outstanding, and the initiator must not reach the store through
	// it any longer. The transport calls the core's endPlacements once
	// its connection is closed.
	endPlacement(ti int32)
	// cancel stops waiting for task ti's write data (the task is aborted).
	// It returns how many of the task's outstanding fetches it gave up at
	// once, whose fetched will never be called; any other ends as usual
	// through fetched (over TCP, with ok false, a burst whose data was
	// being read into the staging at that moment).
	cancel(ti int32) int
	// dataIn sends n octets of task ti's read data from src.
	dataIn(ti int32, src dataRef, n uint32) error
	// staging is the region where write data and data-in that is not the
	// store's wait.
	staging() []byte
	// useLUs prepares the transport to send data from tg's LU stores (iSER
	// registers their mappings) and forgets stores that are no longer
	// served.
	useLUs(tg *lu.Target) error

	// disconnect closes the connection gracefully once posted PDUs are out.
	disconnect()
}

// dataRef names where data-in comes from or write data go: octets of an
// LU's store mapping from offset off, or of the staging region when lu is
// nil.
type dataRef struct {
	lu  *lu.LU
	off int64
}
