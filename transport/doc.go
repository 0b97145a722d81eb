// Package transport is the block protocol of ddpstore: iSER (RFC 7145)
// carrying iSCSI (RFC 7143) over the software RNIC of package iwarp.
// Commands and responses travel as untagged Sends; bulk data moves by tagged
// placement (RDMA Write for reads, RDMA Read for writes). SCSI semantics come
// from github.com/gostor/gotgt used as a library. The package never touches
// a socket, only the RNIC's verbs API.
package transport
