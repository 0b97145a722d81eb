package mem

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

var pageSize = os.Getpagesize()

// Mapping is memory made by mmap, outside the Go heap, that memory regions
// are registered in. Its methods are safe for concurrent use.
type Mapping struct {
	mu       sync.Mutex
	data     []byte // nil once closed
	name     string // file path, or "anonymous"
	writable bool
	file     bool
	regs     int // MRs registered in this mapping and not yet deregistered
}

// Anonymous maps size bytes of zeroed private memory, asks for transparent
// huge pages (where the kernel has them) and faults every page in now so that
// placement never page-faults on the data path.
func Anonymous(size int) (*Mapping, error) { return anonymous(size, true) }

// AnonymousLazy is Anonymous without faulting the pages in: memory is
// taken as it is first touched, for large regions that may stay mostly
// unused (a memory LUN, a staging pool). Placement into a page touched for
// the first time takes a page fault.
func AnonymousLazy(size int) (*Mapping, error) { return anonymous(size, false) }

func anonymous(size int, prefault bool) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mem: anonymous mapping of %d bytes: %w", size, ErrSize)
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mem: mmap %d anonymous bytes: %w", size, err)
	}
	// Advise before populating: pages faulted in first (as MAP_POPULATE
	// would) stay small pages until khugepaged collapses them, if ever.
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil && err != unix.EINVAL {
		unix.Munmap(b)
		return nil, fmt.Errorf("mem: madvise(MADV_HUGEPAGE) %d bytes: %w", size, err)
	}
	if !prefault {
		return &Mapping{data: b, name: "anonymous", writable: true}, nil
	}
	if err := populate(b); err != nil {
		unix.Munmap(b)
		return nil, fmt.Errorf("mem: populate %d anonymous bytes: %w", size, err)
	}
	return &Mapping{data: b, name: "anonymous", writable: true}, nil
}

// populate faults in every page of b for writing: MADV_POPULATE_WRITE (Linux
// 5.14), or one store per page where the kernel lacks it.
func populate(b []byte) error {
	err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	if err != unix.EINVAL {
		return err
	}
	for i := 0; i < len(b); i += pageSize {
		b[i] = 0
	}
	return nil
}

// Bytes returns the mapped memory, or nil once the mapping is closed. The
// slice must not be used after Close.
func (m *Mapping) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data
}

// Len returns the mapped length in bytes (0 once closed).
func (m *Mapping) Len() int { return len(m.Bytes()) }

// Writable reports whether the memory is mapped for writing.
func (m *Mapping) Writable() bool { return m.writable }

// Name returns the mapped file's path, or "anonymous".
func (m *Mapping) Name() string { return m.name }

// Sync writes the pages of a file-backed mapping that hold bytes [off,
// off+n) back to the file and waits for them (msync MS_SYNC, which on Linux
// also flushes the device's volatile cache as fdatasync does).
func (m *Mapping) Sync(off, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.file:
		return fmt.Errorf("mem: sync %s: %w", m.name, ErrNotFile)
	case m.data == nil:
		return fmt.Errorf("mem: sync %s: %w", m.name, ErrClosed)
	case off < 0 || n < 0 || n > len(m.data) || off > len(m.data)-n:
		return fmt.Errorf("mem: sync %s: %d bytes at %d of %d: %w", m.name, n, off, len(m.data), ErrRange)
	case n == 0:
		return nil
	}
	start := off - off%pageSize // the mapping starts on a page boundary
	if err := unix.Msync(m.data[start:off+n], unix.MS_SYNC); err != nil {
		return fmt.Errorf("mem: msync %s: %w", m.name, err)
	}
	return nil
}

// Close unmaps the memory. It fails with ErrBusy while memory regions are
// registered in the mapping, and does nothing once the mapping is closed.
func (m *Mapping) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return nil
	}
	if m.regs > 0 {
		return fmt.Errorf("mem: close %s (%d MRs): %w", m.name, m.regs, ErrBusy)
	}
	err := unix.Munmap(m.data)
	m.data = nil
	if err != nil {
		return fmt.Errorf("mem: munmap %s: %w", m.name, err)
	}
	return nil
}

// Hold returns bytes [off, off+n) of the mapping for writing outside any
// memory registration (iSCSI over TCP reads Data-Out straight into a store
// this way) and counts the use as a registration: Close fails with ErrBusy
// until Release.
func (m *Mapping) Hold(off, n int) ([]byte, error) { return m.hold(off, n, true) }

// Release ends one Hold.
func (m *Mapping) Release() { m.release() }

// hold returns bytes [off, off+n) of the mapping for a new registration and
// counts it, so that Close waits for its deregistration.
func (m *Mapping) hold(off, n int, write bool) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.data == nil:
		return nil, fmt.Errorf("mem: register in %s: %w", m.name, ErrClosed)
	case n <= 0:
		return nil, fmt.Errorf("mem: register %d bytes in %s: %w", n, m.name, ErrSize)
	case off < 0 || n > len(m.data) || off > len(m.data)-n:
		return nil, fmt.Errorf("mem: register %d bytes at %d of %s (%d bytes): %w", n, off, m.name, len(m.data), ErrRange)
	case write && !m.writable:
		return nil, fmt.Errorf("mem: register %s for writing: %w", m.name, ErrReadOnly)
	}
	m.regs++
	return m.data[off : off+n : off+n], nil
}

// release undoes one hold once its region is deregistered.
func (m *Mapping) release() {
	m.mu.Lock()
	m.regs--
	m.mu.Unlock()
}
