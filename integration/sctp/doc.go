// Package sctp runs the tests of DDP over kernel SCTP (RFC 5043) inside the
// vmlab guest (see ../shared/vmlab), whose stock Debian kernel has SCTP:
// the kernel backend of iwarp/sctp, every RDMAP operation and the
// Terminates over it (iwarp), iSER block I/O over it (transport), and the
// RDMA Write benchmark. The machine that runs make test need not have
// SCTP; it needs qemu. It has no code of its own.
package sctp
