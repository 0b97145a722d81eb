package blockdev

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"golang.org/x/sys/unix"
)

// BlockSize is the logical block size every store exports (SBC's 512).
const BlockSize = 512

// Store is a target's backing store. A local one (a file, a block device,
// memory) has the LUN's octets in one mmap'd Mapping, so that read data
// goes to the wire straight from it (the transport registers the Mapping
// for local access and RDMA-Writes from it). A store that is not in this
// process's memory (an RBD image, whose octets are in a cluster) has no
// Mapping: its reads go through ReadAt into the transport's registered
// memory, and each of its operations may wait on the network.
//
// Writes go through WriteAt, which a file or block device turns into
// pwrite(2) on the same page cache the Mapping shows; Sync makes them
// durable. A Store's methods may be called from several goroutines, but
// never after Close.
type Store interface {
	// Mapping returns the memory holding octets [0, Size), or nil for a
	// store that is not in this process's memory.
	Mapping() *mem.Mapping
	// ReadAt reads octets [off, off+len(p)) into p. An error is an I/O
	// error of the medium.
	ReadAt(p []byte, off int64) error
	// Size is the LUN's size in octets, a multiple of BlockSize.
	Size() int64
	// ReadOnly reports whether writes must be refused. The Mapping of a
	// read-only store is not writable: a store into it faults.
	ReadOnly() bool
	// WriteAt writes p to octets [off, off+len(p)), visible in the
	// Mapping when it returns. An error is an I/O error of the medium (a
	// failing disk, a full file system under a sparse file); part of p may
	// have been written.
	WriteAt(p []byte, off int64) error
	// Sync makes the octets [off, off+n) durable.
	Sync(off, n int64) error
	// Discard deallocates [off, off+n) where the store can: later reads of
	// it return zeros, on every store (the LU reports this as LBPRZ).
	Discard(off, n int64) error
	// Thin reports whether Discard really gives the space back (holes
	// punched in a file, deallocated device blocks, memory returned to the
	// system) rather than writing zeros: the LU then reports itself thin
	// provisioned (SBC-3 4.7) and accepts UNMAP. It is false for a
	// read-only store. It can turn false during the store's life when the
	// file system turns out not to punch holes; it never turns true.
	Thin() bool
	// Close releases the store; the Mapping must no longer be registered.
	Close() error
}

// InMemory is implemented by the stores whose Mapping is memory itself: a
// memory store, a file on tmpfs. Their pages, once allocated, take stores
// with no writeback fault and no I/O that can fail, so a transport may
// place write data straight into the Mapping (see transport/lu's
// Placement) after populating the pages (Populate).
type InMemory interface {
	InMemory() bool
}

// Populate allocates and maps writable the pages of m's octets [off,
// off+n) (madvise MADV_POPULATE_WRITE), as a store to each would but
// without one, so that stores into them that follow do not fault. Where a
// page cannot be allocated (a full tmpfs under a sparse file) it returns
// the error instead of the SIGBUS a store would get.
func Populate(m *mem.Mapping, off, n int64) error {
	b := m.Bytes()
	if off < 0 || n < 0 || off+n > int64(len(b)) {
		return fmt.Errorf("blockdev: populate [%d, %d) of a %d-octet mapping", off, off+n, len(b))
	}
	a, e := off&^(pageSize-1), min((off+n+pageSize-1)&^(pageSize-1), int64(len(b)))
	if a >= e {
		return nil
	}
	if err := unix.Madvise(b[a:e], unix.MADV_POPULATE_WRITE); err != nil {
		return fmt.Errorf("blockdev: madvise(MADV_POPULATE_WRITE) [%d, %d) of %s: %w", a, e, m.Name(), err)
	}
	return nil
}

// Open opens the backing store at path: a block device (size must be 0 or
// the device's size), or a regular file, created sparse at size when path
// does not exist (see OpenFile).
func Open(path string, size int64, readOnly bool) (Store, error) {
	var st unix.Stat_t
	switch err := unix.Stat(path, &st); {
	case err == unix.ENOENT:
		return OpenFile(path, size, readOnly)
	case err != nil:
		return nil, syscallError("stat", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return OpenFile(path, size, readOnly)
	case unix.S_IFBLK:
		d, err := OpenDevice(path, readOnly)
		if err != nil {
			return nil, err
		}
		if size != 0 && size != d.Size() {
			d.Close()
			return nil, fmt.Errorf("blockdev: block device %s has %d octets, not the configured %d", path, d.Size(), size)
		}
		return d, nil
	default:
		return nil, fmt.Errorf("blockdev: %s is neither a regular file nor a block device (mode %v)", path, os.FileMode(st.Mode&0o777)|fileType(st.Mode))
	}
}

// fileType turns the S_IFMT bits of a stat mode into os.FileMode type bits
// for printing.
func fileType(m uint32) os.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return os.ModeDir
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFSOCK:
		return os.ModeSocket
	case unix.S_IFLNK:
		return os.ModeSymlink
	}
	return 0
}

// syscallError names the system call and the path it failed on.
func syscallError(call, path string, err error) error {
	return fmt.Errorf("blockdev: %s %s: %w", call, path, err)
}

func checkRange(s Store, off, n int64) error {
	if off < 0 || n < 0 || off+n < off || off+n > s.Size() {
		return fmt.Errorf("blockdev: range [%d, %d) outside the store's %d octets", off, off+n, s.Size())
	}
	return nil
}

var pageSize = int64(os.Getpagesize())

// zeroPage is compared against to find out whether memory is all zeros.
var zeroPage [64 << 10]byte

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:k], zeroPage[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// zero clears b unless it is all zeros already: reading a hole of a sparse
// file allocates nothing, writing it would.
func zero(b []byte) {
	if !allZero(b) {
		clear(b)
	}
}

// alignedInside returns the largest [a, b) inside [off, off+n) whose ends
// are multiples of grain; a >= b when there is none.
func alignedInside(off, n, grain int64) (a, b int64) {
	return (off + grain - 1) / grain * grain, (off + n) / grain * grain
}
