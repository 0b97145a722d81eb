// Package ddp implements the Direct Data Placement protocol (RFC 5041;
// the text followed is draft-ietf-rddp-ddp-03) as pure codecs: the DDP
// Control Field and the tagged and untagged headers of section 4, the
// segmentation of a DDP Message into DDP Segments of section 5.2, and the
// Data Sink validation of section 7.1 with the error numbers of section 7.2.
//
// A Header is a view over the octets of a received or outgoing DDP Segment,
// in the style of gVisor's tcpip/header: accessors read fields in place and
// encoders write into a buffer the caller owns. Nothing here allocates, does
// I/O or keeps state between calls, so the engine can run it per segment on
// the data path.
//
// The ULP of DDP (RDMAP, package iwarp/rdmap) owns the RsvdULP fields: DDP
// carries them unmodified (4.2, 4.3).
package ddp
