package blockdev

import (
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// Memory is a Store in anonymous memory: fast, and lost when the process
// ends. Sync has nothing to do.
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

// Sync implements Store: memory is as durable as it gets.
func (s *Memory) Sync(off, n int64) error { return checkRange(s, off, n) }

// Discard implements Store by zeroing the range.
func (s *Memory) Discard(off, n int64) error {
	if err := checkRange(s, off, n); err != nil {
		return err
	}
	clear(s.m.Bytes()[off : off+n])
	return nil
}

// Close implements Store.
func (s *Memory) Close() error { return s.m.Close() }

func checkRange(s Store, off, n int64) error {
	if off < 0 || n < 0 || off+n < off || off+n > s.Size() {
		return fmt.Errorf("blockdev: range [%d, %d) outside the store's %d octets", off, off+n, s.Size())
	}
	return nil
}
