package blockdev

import "github.com/ddpstore/ddpstore/iwarp/mem"

// BlockSize is the logical block size every store exports (SBC's 512).
const BlockSize = 512

// Store is a target's backing store: a LUN's octets in one mmap'd Mapping,
// so that read data goes to the wire straight from it (the transport
// registers the Mapping for local access and RDMA-Writes from it).
type Store interface {
	// Mapping returns the memory holding octets [0, Size).
	Mapping() *mem.Mapping
	// Size is the LUN's size in octets, a multiple of BlockSize.
	Size() int64
	// ReadOnly reports whether writes must be refused.
	ReadOnly() bool
	// Sync makes the octets [off, off+n) durable.
	Sync(off, n int64) error
	// Discard deallocates [off, off+n): later reads of it return zeros.
	Discard(off, n int64) error
	// Close releases the store; the Mapping must no longer be registered.
	Close() error
}
