// Package nbd presents a remote LUN as a kernel NBD device (/dev/nbdN)
// served by this process: the kernel's NBD client is configured over
// generic netlink (NBD_CMD_CONNECT) with one end of a socketpair, so no
// TCP port is opened, and the other end is served with the NBD
// transmission protocol against the LUN through hostdev/remote. Flush is
// SYNCHRONIZE CACHE, trim is UNMAP, write zeroes is WRITE SAME(16) of a
// zero block. A connection that fails is replaced with
// NBD_CMD_RECONFIGURE while the kernel holds I/O.
//
// proto.go is the wire codec, pure functions on byte slices (fuzzed);
// netlink.go the generic netlink requests; server.go the transmission
// phase; device.go the device's life.
package nbd
