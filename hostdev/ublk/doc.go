// Package ublk presents a remote LUN as a ublk block device (/dev/ublkbN)
// served by this process over io_uring: the control commands (ADD_DEV,
// SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV) go to /dev/ublk-control as
// URING_CMDs on 128-octet SQEs, and one queue's thread fetches requests
// and commits their results (FETCH_REQ, COMMIT_AND_FETCH_REQ) on
// /dev/ublkcN, reading each request's descriptor from the area mmap'd
// from it. READ and WRITE go to the LUN through hostdev/remote, FLUSH is
// SYNCHRONIZE CACHE, DISCARD is UNMAP and WRITE_ZEROES is WRITE SAME(16)
// (hostdev/nbd's LUN). The logical block size is the LUN's.
//
// Data is copied: ublk (Linux 6.1, the vmlab guest's kernel) copies
// between the request's pages and a per-tag buffer of this process, and
// this process copies between that buffer and the session's registered
// slots. Zero copy (UBLK_F_SUPPORT_ZERO_COPY) the 6.1 driver refuses,
// and user copy (UBLK_F_USER_COPY) came in 6.5.
//
// io_uring is driven with raw system calls through hostdev/uring, the
// ring code this package shares with lunfs's FUSE-over-io_uring transport:
// ublk needs only setup, the mmap'd rings and enter, with URING_CMD and
// POLL_ADD.
package ublk
