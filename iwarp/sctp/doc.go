// Package sctp is the DDP/SCTP adaptation layer (RFC 5043; the text
// followed is draft-ietf-rddp-sctp-06, as its word diff from -05 in
// ../shared/specs/001_b4e9969e695684fa.txt): the lower layer (LLP) that
// carries DDP Segments over SCTP instead of MPA/TCP.
//
// The pure part, in the style of pion/sctp with one file per message and the
// RFC diagram beside its codec, does no I/O:
//
//   - chunk.go: the DDP-SSN that leads every Payload Data Chunk (5.2.1) and
//     the DDP Segment Chunk (5.2.2, PPID 0x10);
//   - control.go: the DDP Stream Session Control message (5.2.3, PPID 0x11):
//     Initiate, Accept, Reject, Terminate, with up to 512 octets of Private
//     Data;
//   - core.go: the DDP Stream Session state machine of section 6 as a pure
//     core (inputs: a received chunk or a local call; outputs: the control
//     message to send and the event to report), which turns every sequence
//     that is not one of the legal patterns into a termination;
//   - reorder.go: the receiver's reordering by DDP-SSN (section 10), with the
//     validity check on every DDP-SSN, and the sender's 32767-in-flight limit;
//   - mulpdu.go: the maximum DDP Segment size of section 9.
//
// The run-time part binds DDP Stream Sessions to the streams of an SCTP
// association: Association multiplexes sessions over same-numbered stream
// pairs (section 8), every chunk unordered (section 10), over one of two
// backends: kernel SCTP through golang.org/x/sys/unix (linux only) or
// userspace SCTP over UDP (github.com/pion/sctp). A Session is what the RNIC
// engine (package iwarp) uses as its LLP: whole DDP Segments in order, with
// SCTP's CRC32c as the strong digest (RFC 5041 section 3).
package sctp
