// Package tgt tests ddpinitiator over iSCSI/TCP (--transport iscsi-tcp)
// against a target that is not ours: Linux's user-space SCSI target tgtd
// (Debian package tgt, installed by ../../scripts/tgt.sh), started by the
// test on a free loopback port with its own control socket, one LUN on a
// file. It runs discover, login and verified benches as processes, checks
// digests and that the data lands in tgtd's backing file with the
// package, and, as root with FUSE and fio, a fio verify through
// ddpinitiator mount. It skips when tgt cannot be installed. What it
// found is in docs/interop.md, "tgt over TCP".
package tgt
