// Package blockdev holds the target's backing stores: regular files, block
// devices and memory, all mmap'd so read data goes from the page cache to
// the wire without a copy. transport/lu serves them as LUs; blockdev imports
// nothing above iwarp/mem. The initiator's side, a remote LUN presented on
// the host as a file or a block device, is in hostdev/.
package blockdev
