// Package rdmap implements the Remote Direct Memory Access Protocol (RFC
// 5040) as pure codecs over the DDP codecs of package iwarp/ddp: the RDMAP
// Control Field and Invalidate STag carried in DDP's RsvdULP (4.1), the
// use of DDP fields by each RDMA Message (Figure 4), the RDMA Read Request
// Header (4.4), the Terminate Header (4.8), the Terminate error numbers
// (Figure 9, with DDP's and MPA's numbers under their layers) and the
// validation of incoming RDMA Messages (7.2).
//
// As in package ddp, a header is a byte-slice view with accessors, encoders
// write into the caller's buffer, decoders check lengths and never panic,
// and nothing allocates.
package rdmap
