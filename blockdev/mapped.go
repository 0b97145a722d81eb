package blockdev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"golang.org/x/sys/unix"
)

// mapped is what File and Device share: an open file descriptor (for
// fallocate and ioctls) and a MAP_SHARED mapping of the whole file.
type mapped struct {
	path     string
	kind     string // "file" or "block device", for errors
	fd       int
	m        *mem.Mapping
	data     []byte // m's memory, [0, size)
	readOnly bool
	grain    int64 // hole punching granularity: the page size, or a larger logical block
	// copyMax is the longest write stored through the mapping rather than
	// with pwrite (see writeAt): 0 but on tmpfs.
	copyMax int
	// inMemory: the file is on tmpfs (File.InMemory).
	inMemory bool

	// punch: fallocate(PUNCH_HOLE) works here, until it fails with
	// EOPNOTSUPP (Discard then zeroes through the mapping).
	punch  atomic.Bool
	closed atomic.Bool
	mu     sync.Mutex // serializes Close
}

// mapShared maps the first size octets of path, which fd has open, and
// checks that path still names the file fd has open (mem.MapFile opens the
// path itself), by device and inode numbers.
func (s *mapped) mapShared(st *unix.Stat_t, size int64) error {
	if int64(int(size)) != size {
		return fmt.Errorf("blockdev: %s %s: size %d too large to map on this platform", s.kind, s.path, size)
	}
	mode := mem.ReadWrite
	if s.readOnly {
		mode = mem.ReadOnly
	}
	m, err := mem.MapFile(s.path, 0, int(size), mode)
	if err != nil {
		return fmt.Errorf("blockdev: %s %s: %w", s.kind, s.path, err)
	}
	var now unix.Stat_t
	if err := unix.Stat(s.path, &now); err != nil {
		m.Close()
		return syscallError("stat", s.path, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino || now.Rdev != st.Rdev {
		m.Close()
		return fmt.Errorf("blockdev: %s %s was replaced while it was being opened", s.kind, s.path)
	}
	s.m, s.data = m, m.Bytes()[:size]
	return nil
}

func (s *mapped) size() int64 { return int64(len(s.data)) }

// check validates [off, off+n) for operation op.
func (s *mapped) check(op string, off, n int64, write bool) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("blockdev: %s %s: %w", op, s.path, mem.ErrClosed)
	case off < 0 || n < 0 || off+n < off || off+n > s.size():
		return fmt.Errorf("blockdev: %s %s: range [%d, %d) outside its %d octets", op, s.path, off, off+n, s.size())
	case write && s.readOnly:
		return fmt.Errorf("blockdev: %s %s: opened read-only", op, s.path)
	}
	return nil
}

// writeAt writes p at off. A first store to a page of a MAP_SHARED
// mapping is a page fault: a page not yet in this process's page tables, a
// hole of a sparse file, and, on every file system with writeback and on
// block devices, a page that writeback has cleaned and write-protected
// again for dirty tracking. In a virtual machine a fault costs an exit:
// about 14 µs per 4 KiB page here, 3.4 ms to store 1 MiB into pages not
// yet mapped, where pwrite(2) takes 125 µs; a small pwrite costs about
// 3 µs, a store into a mapped page nothing. So writes go with pwrite,
// which fills the same page cache the mapping shows (reads from it see the
// data when it returns, msync writes it back, and an I/O error comes back
// as an error rather than SIGBUS), except writes of at most copyMax
// octets on tmpfs, whose pages once mapped stay writable (shmem does no
// dirty tracking).
func (s *mapped) writeAt(p []byte, off int64) error {
	if err := s.check("write", off, int64(len(p)), true); err != nil {
		return err
	}
	if len(p) <= s.copyMax {
		// Non-temporal: a block written is seldom read back at once,
		// and the store's lines are not read before being written.
		mem.CopyNT(s.data[off:], p)
		return nil
	}
	if s.kind == "file" {
		// pwrite past the end would grow a file that was cut under the
		// store, where the mapping answered SIGBUS; a store never grows a
		// file. One fstat costs far less than the write.
		var st unix.Stat_t
		if err := unix.Fstat(s.fd, &st); err != nil {
			return syscallError("fstat", s.path, err)
		}
		if end := off + int64(len(p)); st.Size < end {
			return fmt.Errorf("blockdev: write %s [%d, %d): the file was cut to %d octets under the store", s.path, off, end, st.Size)
		}
	}
	for len(p) > 0 {
		n, err := unix.Pwrite(s.fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("blockdev: pwrite %s [%d, %d): %w", s.path, off, off+int64(len(p)), err)
		case n == 0:
			return fmt.Errorf("blockdev: pwrite %s [%d, %d): %w", s.path, off, off+int64(len(p)), unix.EIO)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// readAt reads [off, off+len(p)) with pread(2): a read error of the
// medium or a file cut under the store is an error here, where through the
// mapping it would be SIGBUS.
func (s *mapped) readAt(p []byte, off int64) error {
	if err := s.check("read", off, int64(len(p)), false); err != nil {
		return err
	}
	for len(p) > 0 {
		n, err := unix.Pread(s.fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("blockdev: pread %s [%d, %d): %w", s.path, off, off+int64(len(p)), err)
		case n == 0:
			return fmt.Errorf("blockdev: pread %s [%d, %d): the %s ends before it (cut under the store)", s.path, off, off+int64(len(p)), s.kind)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// sync writes the dirty pages of [off, off+n) back and waits for them with
// msync(MS_SYNC). On Linux that is vfs_fsync_range over the range with
// datasync set: a regular file's file system writes the pages, commits the
// metadata needed to read them back (block allocation, size) and flushes
// the device's volatile cache, as fdatasync does; a block device writes the
// pages and issues a cache flush (blkdev_fsync). sync_file_range alone
// would be neither, and fdatasync would write back the whole file.
func (s *mapped) sync(off, n int64) error {
	if err := s.check("sync", off, n, false); err != nil {
		return err
	}
	if err := s.m.Sync(int(off), int(n)); err != nil {
		return fmt.Errorf("blockdev: msync(MS_SYNC) %s [%d, %d): %w", s.path, off, off+n, err)
	}
	return nil
}

// discard deallocates the whole grains of [off, off+n) with
// fallocate(FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE) and zeroes the
// partial grains at its edges through the mapping. A regular file gets
// holes; a block device gets REQ_OP_WRITE_ZEROES with unmapping allowed
// (blkdev_fallocate), which deallocates where the device can and always
// reads back zeros, unlike BLKDISCARD. Where the kernel or file system
// cannot punch (EOPNOTSUPP), the range is zeroed through the mapping
// instead, and Thin turns false. The kernel drops the page cache of the
// punched range, so the mapping reads zeros there at once.
func (s *mapped) discard(off, n int64) error {
	if err := s.check("discard", off, n, true); err != nil {
		return err
	}
	a, b := alignedInside(off, n, s.grain)
	if a >= b {
		zero(s.data[off : off+n])
		return nil
	}
	if s.punch.Load() {
		err := unix.Fallocate(s.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, a, b-a)
		switch {
		case errors.Is(err, unix.EOPNOTSUPP):
			s.punch.Store(false)
		case err != nil:
			return fmt.Errorf("blockdev: fallocate(PUNCH_HOLE) %s [%d, %d): %w", s.path, a, b, err)
		default:
			zero(s.data[off:a])
			zero(s.data[b : off+n])
			return nil
		}
	}
	zero(s.data[off : off+n])
	return nil
}

// close unmaps the memory, then closes the descriptor. It fails, leaving
// the store open, while memory regions are registered in the mapping.
func (s *mapped) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	if err := s.m.Close(); err != nil {
		return fmt.Errorf("blockdev: close %s: %w", s.path, err)
	}
	s.closed.Store(true)
	if err := unix.Close(s.fd); err != nil {
		return syscallError("close", s.path, err)
	}
	return nil
}

// closeFD closes fd on a failed open, keeping the first error.
func closeFD(fd int) { _ = unix.Close(fd) }
