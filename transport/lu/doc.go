// Package lu executes SCSI commands on logical units. Each LU is a gotgt
// (github.com/gostor/gotgt) SBC device used as a library, over a
// blockdev.Store; a Target groups LUs under an iSCSI target name with its own
// LUN map, so any number of targets live in one process without global state.
//
// READ and WRITE replace gotgt's command functions: READ hands the transport a
// slice of the store's mapping (which it RDMA-Writes to the initiator without
// a copy), WRITE copies exactly the transfer length from the staging buffer
// its data arrived in. Every other command runs gotgt's implementation; a
// panic inside it becomes CHECK CONDITION, HARDWARE ERROR.
package lu
