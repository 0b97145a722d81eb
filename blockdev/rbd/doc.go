// Package rbd is a Ceph RBD image as a target's backing store, through
// librbd and librados with cgo: Open connects to the cluster and opens the
// image, and every read, write, flush, discard and write-zeroes is one
// asynchronous librbd request (rbd_aio_*), so one slow object stalls only
// the goroutine that waits for it. The goroutine holds an OS thread only
// while it hands the request to librbd; librbd's completion callback,
// running on a librbd thread, wakes it through a channel.
//
// # Why not go-ceph
//
// github.com/ceph/go-ceph was tried first (v0.36.0, the newest the module
// proxy serves) and not used, for two reasons. Its rbd package has no
// asynchronous I/O: Image.ReadAt and WriteAt are the synchronous
// rbd_read2/rbd_write2, which hold an OS thread for a request's whole round
// trip to the OSDs. And v0.36.0 supports Ceph from 18.2 (reef) on: against
// Debian bookworm's 16.2.15 (pacific) its rbd package fails to compile
// ("could not determine what C.rbd_encryption_load2 refers to") unless every
// go command of the project (build, vet, test, staticcheck, gopls) is given
// -tags pacific. The few calls needed are small enough to bind directly:
// rados_create2, rados_conf_read_file, rados_conf_set, rados_connect,
// rados_ioctx_create, rbd_open(_read_only), rbd_get_size, rbd_close, and
// rbd_aio_read, rbd_aio_write, rbd_aio_flush, rbd_aio_discard,
// rbd_aio_write_zeroes with their completions.
//
// # Shared state
//
// Shared is a small RADOS object in an image's pool that the gateways
// exporting the image keep state in (the LU's persistent reservations):
// read with its version, replaced by compare-and-write (one write op with
// rados_write_op_assert_version, or an exclusive create), and followed
// through watch/notify (rados_watch3, rados_notify2, rados_notify_ack) so
// that a Store returns only once every other gateway has taken it in.
//
// # Building
//
// The package needs cgo and the headers and libraries of librbd-dev and
// librados-dev (scripts/ceph.sh installs them; `make` runs it). Without cgo
// (CGO_ENABLED=0, as the vmlab guest's static binaries are built) the
// package still compiles, so what imports it does too, but Open fails with
// ErrNoCgo: such a binary serves no RBD LUN.
//
// # Memory
//
// librbd keeps the buffer of a read or write until the request completes,
// after the cgo call that submitted it has returned. The buffer may be
// memory mmap'd by the caller (a registered region: librbd reads from and
// writes into it directly) or a Go slice, which is pinned (runtime.Pinner)
// until the completion. A request's buffer must not be touched by the
// caller until the method returns, which is when the request has completed.
//
// # Semantics
//
// Writes go through librbd's cache as the cluster's configuration says
// (rbd_cache, by default writeback until the first flush, then writeback):
// a write is visible to later reads through the same Image when WriteAt
// returns, and durable once a Sync that follows it returns. Sync flushes the
// whole image (librbd has no ranged flush). Discard and WriteZeroes are both
// rbd_aio_write_zeroes, which in librbd 16 deallocates the objects wholly
// inside the range and zeroes the parts of objects at its ends: later reads
// return zeros, and space comes back (Thin). rbd_aio_discard is not used for
// Discard: with librbd's defaults (rbd_skip_partial_discard,
// rbd_discard_granularity_bytes of 64 KiB) it leaves the unaligned ends of a
// range as they were, and a later read does not return zeros.
//
// The image's size is read once, at Open: a resize by another client is
// not seen until the image is opened again.
//
// # Waiting on the cluster
//
// Nothing here times out by itself; the cluster's configuration decides.
// Open waits for the monitors up to client_mount_timeout (300 s unless
// ceph.conf says otherwise), then fails with ETIMEDOUT ("connect as
// client.admin: connection timed out"). A request waits until the OSDs serve it,
// however long a PG stays unavailable, unless ceph.conf sets
// rados_osd_op_timeout: then it fails with ETIMEDOUT. A request cannot be
// withdrawn once librbd has it: an aborted SCSI task's request still runs
// to completion. A client the cluster has blocklisted (as a gateway that
// breaks another's exclusive lock does) gets ESHUTDOWN for every request.
package rbd
