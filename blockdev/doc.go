// Package blockdev holds what sits at either end of the block protocol: the
// target's backing stores (regular files, block devices and memory, all
// mmap'd so read data goes from the page cache to the wire without a copy),
// and the initiator's local exposure of a remote LUN as a file that fio,
// losetup, mkfs and mount can use.
package blockdev
