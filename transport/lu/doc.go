// Package lu executes SCSI commands on logical units. Each LU is a gotgt
// (github.com/gostor/gotgt) SBC device used as a library, over a
// blockdev.Store; a Target groups LUs under an iSCSI target name with its own
// LUN map, so any number of targets live in one process without global state.
//
// READ and WRITE replace gotgt's command functions: READ hands the transport a
// slice of the store's mapping (which it RDMA-Writes to the initiator without
// a copy), WRITE copies the CDB's transfer length from the staging buffer
// its data arrived in, or the whole blocks of a shorter data-out, as LIO
// does; Task.DataOutLength tells the transport what the CDB asked for, so
// it can report the residual. The commands gotgt gets wrong or lacks are ours too:
// WRITE AND VERIFY, WRITE SAME(10/16) (with UNMAP and NDOB), UNMAP,
// SYNCHRONIZE CACHE(10/16) over its range, COMPARE AND WRITE, READ
// CAPACITY(16), GET LBA STATUS, and INQUIRY: the standard data (SPC-4, SBC-3) and the
// pages 0x00, 0x80, 0x83, 0xB0, 0xB1 and 0xB2, each with its full length
// in its length field and cut to the allocation length.
// Thin provisioning is reported and honoured from one source, LU.Thin (the
// store's Thin). PERSISTENT RESERVE IN/OUT (broken in gotgt) and ORWRITE(16)
// (a plain WRITE in gotgt) are answered ILLEGAL REQUEST, INVALID COMMAND
// OPERATION CODE. Every other command runs gotgt's implementation.
//
// RESERVE and RELEASE (6 and 10) keep SPC-2 reservations per I_T nexus,
// which the caller names in Task.Nexus, and Execute answers RESERVATION
// CONFLICT to the commands SPC-2 forbids another nexus; the transport
// tells the Target of nexus loss and resets (ITNexusLoss,
// LogicalUnitReset, Reset), which release them (reserve.go).
//
// Commands that change blocks (WRITE, WRITE AND VERIFY, WRITE SAME, UNMAP,
// COMPARE AND WRITE) take a per-LU striped range lock, so COMPARE AND WRITE
// is atomic against them; READ takes none. An I/O error of the store (a
// failed Sync or Discard, or a memory fault of the mapping, which is how a
// mapped file's I/O error shows) is CHECK CONDITION, MEDIUM ERROR, never
// BUSY as gotgt answers it; any other panic becomes CHECK CONDITION,
// HARDWARE ERROR.
//
// Section numbers of SBC-3 and SPC-4 in comments are from memory.
package lu
