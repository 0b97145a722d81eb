// Package mpa implements Marker PDU Aligned framing for TCP (RFC 5044) as pure
// codecs and state machines: FPDU framing with CRC32c and Markers (sections
// 4.1 to 4.4), MULPDU from the EMSS (4.5), the Startup frames of 7.1 with the
// enhanced connection establishment of RFC 6581 (MPA revision 2), and the
// error codes of section 8.
//
// Nothing here reads or writes a socket. The transmit Framer turns ULPDUs into
// iovecs for one writev that point into the caller's payload, or, staging,
// copies whole FPDUs into one buffer; the receive
// Deframer strips Markers, checks CRCs and tells its caller where each ULPDU's
// octets lie in the stream, so that an engine can read payload straight into
// its final buffer.
package mpa
