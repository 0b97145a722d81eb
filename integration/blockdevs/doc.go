// Package blockdevs tests "ddpinitiator attach --nbd" and "--ublk"
// (hostdev/nbd, hostdev/ublk) where the kernel has the drivers: inside the
// vmlab guest (../shared/vmlab), whose kernel has nbd.ko and ublk_drv.ko,
// booted once per driver. The host side builds this package's tests,
// ddpinitiator and ddptarget as static binaries and copies in mke2fs,
// e2fsck and Debian's fio with their libraries and the ext4 module of the
// guest's kernel; the guest side runs an iSER target in the test process
// (loopback, the software RNIC over TCP), attaches its LUN with the
// package and with ddpinitiator, and checks every octet written through
// the device against the target's store; then it runs ddptarget as a
// process on a file, verifies its LUN with fio (libaio, O_DIRECT,
// verify=crc32c) raw and through ext4, kills the target with SIGKILL
// while writers run and starts it again, and checks that everything
// acknowledged reads back and that e2fsck finds the file system clean.
package blockdevs
