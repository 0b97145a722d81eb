package blockdev

import (
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"golang.org/x/sys/unix"
)

// Memory is a Store in anonymous memory: fast, and lost when the process
// ends. Sync has nothing to do. It is thin: memory is taken as blocks are
// first touched, and Discard gives whole pages back to the system.
type Memory struct {
	m *mem.Mapping
}

// NewMemory returns a zeroed memory store of size octets. Memory is taken
// as blocks are first written or read.
func NewMemory(size int64) (*Memory, error) {
	if size <= 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("blockdev: memory store size %d is not a positive multiple of %d", size, BlockSize)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("blockdev: memory store size %d too large for this platform", size)
	}
	m, err := mem.AnonymousLazy(int(size))
	if err != nil {
		return nil, fmt.Errorf("blockdev: memory store of %d octets: %w", size, err)
	}
	return &Memory{m: m}, nil
}

// Mapping implements Store.
func (s *Memory) Mapping() *mem.Mapping { return s.m }

// Size implements Store.
func (s *Memory) Size() int64 { return int64(s.m.Len()) }

// ReadOnly implements Store: a memory store is always writable.
func (s *Memory) ReadOnly() bool { return false }

// Thin implements Store: Discard returns memory to the system.
func (s *Memory) Thin() bool { return true }

// ReadAt implements Store: a copy from the mapping.
func (s *Memory) ReadAt(p []byte, off int64) error {
	if err := checkRange(s, off, int64(len(p))); err != nil {
		return err
	}
	copy(p, s.m.Bytes()[off:])
	return nil
}

// WriteAt implements Store: a copy into the mapping, with non-temporal
// stores (mem.CopyNT).
func (s *Memory) WriteAt(p []byte, off int64) error {
	if err := checkRange(s, off, int64(len(p))); err != nil {
		return err
	}
	mem.CopyNT(s.m.Bytes()[off:], p)
	return nil
}

// Sync implements Store: memory is as durable as it gets.
func (s *Memory) Sync(off, n int64) error { return checkRange(s, off, n) }

// Discard implements Store: the whole pages of the range are given back to
// the system with madvise(MADV_DONTNEED) (the private anonymous mapping
// then reads zeros there), the partial pages at its edges are zeroed.
func (s *Memory) Discard(off, n int64) error {
	if err := checkRange(s, off, n); err != nil {
		return err
	}
	b := s.m.Bytes()
	a, e := alignedInside(off, n, pageSize)
	if a >= e {
		clear(b[off : off+n])
		return nil
	}
	if err := unix.Madvise(b[a:e], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("blockdev: madvise(MADV_DONTNEED) memory store [%d, %d): %w", a, e, err)
	}
	clear(b[off:a])
	clear(b[e : off+n])
	return nil
}

// InMemory implements InMemory.
func (s *Memory) InMemory() bool { return true }

// Close implements Store.
func (s *Memory) Close() error { return s.m.Close() }
