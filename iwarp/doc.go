// Package iwarp is ddpstore's software RNIC: the iWARP protocol suite of
// RDMAP (RFC 5040) over DDP (RFC 5041) over MPA/TCP (RFC 5044, RFC 6581)
// behind a verbs-style API.
//
// A Device owns an STag namespace (package mem) and the queue pairs created
// on it. Memory is registered under a protection domain; queue pairs carry
// Sends, RDMA Writes and RDMA Reads posted as work requests and report them
// in completion queues (package cq). A Listener and QP.Connect run the MPA
// Startup in the two roles.
//
// Each connected QP runs two goroutines. The receiver parses FPDU and DDP
// headers from a small staging buffer, validates every segment (RFC 5041
// 7.1, RFC 5040) before placing it, and reads the payload straight from the
// socket into its registered buffer with readv (with Markers, it then
// squeezes them out of that buffer in place). The sender segments work
// requests to the MULPDU of the connection's current EMSS and hands FPDUs of
// many requests to TCP in one writev whose payload iovecs point into the
// registered buffers; with Markers it copies the FPDUs, Markers and all, into
// a staging buffer instead, because a writev split at every 512-octet Marker
// interval costs the kernel more than that copy. A peer that breaks the protocol is sent the Terminate
// message that names what it did, and the QP goes to the error state; other
// QPs are unaffected.
package iwarp
