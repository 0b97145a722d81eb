// Package peers runs ddpstore against iSER implementations that are not
// its own, inside the vmlab guest (../shared/vmlab) over Linux's
// soft-iWARP (siw): our initiator (ddpinitiator) against Linux's LIO
// target with its iSER driver (isert) and against Debian's tgtd with its
// iSER driver, and libiscsi's conformance suite (iscsi-test-cu) over iSER
// against our target, with LIO isert as the control that tells libiscsi's
// and siw's failures from ours. The host side brings in what the guest
// image lacks through the shared directory: the guest kernel's own target
// modules (target_core_mod, iscsi_target_mod, ib_isert) and FUSE, and
// Debian's libiscsi-bin, tgt and fio with their libraries. One guest boot
// runs every guest test. What it found is in docs/interop.md.
package peers
