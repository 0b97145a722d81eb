// Package multipath runs Linux's dm-multipath over two ib_iser sessions to
// two ddptarget gateways of one image, inside the vmlab guest (see
// ../shared/vmlab). In the guest: two ddptarget processes export one image
// file under one target name on two portals, each its own ALUA target port
// group (1 active/optimized, 2 active/non-optimized); open-iscsi's iscsid
// and iscsiadm log Linux's iSER initiator in to both over siw, giving two
// SCSI disks with one WWN, which scsi_dh_alua claims; dmsetup builds a
// multipath device over them with one priority group per gateway. Verified
// O_DIRECT I/O runs on the multipath device while the gateway of the
// active path is killed with SIGKILL: no I/O may fail, every read must
// return what was last written, and dm-multipath must have failed the dead
// path and moved to the other group. Then the killed gateway starts
// again, iscsid logs in to it again, its path is reinstated and its group
// switched to (what multipathd does on failback), and fio (libaio,
// O_DIRECT, verify=crc32c) writes and verifies the multipath device while
// that gateway is killed once more. The host side brings in what the
// guest image lacks: the SCSI, iSER and device-mapper modules of the
// guest's own kernel, iscsid, iscsiadm, dmsetup and fio with their
// libraries, and ddptarget built without cgo.
package multipath
