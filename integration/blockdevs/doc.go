// Package blockdevs tests "ddpinitiator attach --nbd" and "--ublk"
// (hostdev/nbd, hostdev/ublk) where the kernel has the drivers: inside the
// vmlab guest (../shared/vmlab), whose kernel has nbd.ko and ublk_drv.ko,
// booted once per driver. The host side builds this package's tests and
// ddpinitiator as static binaries and copies in mke2fs with its libraries
// and the ext4 module of the guest's kernel; the guest side runs an iSER
// target in the test process (loopback, the software RNIC over TCP),
// attaches its LUN with the package and with ddpinitiator, and checks
// every octet written through the device against the target's store.
package blockdevs
