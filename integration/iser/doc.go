// Package iser holds the interoperability test of ddpstore's iSER target
// (transport/target on the software RNIC in iwarp/) against Linux's kernel
// iSER initiator: ib_iser driven by open-iscsi's iscsid and iscsiadm, over
// the kernel's soft-iWARP (siw). It runs inside the vmlab guest (see
// ../shared/vmlab); the host side brings in what the guest image lacks (the
// SCSI and iSCSI kernel modules of the guest's own kernel, and open-iscsi's
// programs with their libraries) through the shared directory. What it
// found is in docs/interop.md.
package iser
