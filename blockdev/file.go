package blockdev

import (
	"errors"
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"golang.org/x/sys/unix"
)

// File is a Store over a regular file (a disk image), mapped shared: what
// the LU writes reaches the file through the page cache, Sync makes it
// durable, and Discard punches holes.
type File struct {
	s mapped
}

// OpenFile opens the regular file at path as a store of size octets, a
// multiple of BlockSize. A missing file is created (mode 0600) sparse at
// size, which must then be positive, unless readOnly. For an existing file,
// size 0 takes the file's size; any other size must be the file's: a store
// never truncates or grows a file.
func OpenFile(path string, size int64, readOnly bool) (*File, error) {
	if size < 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("blockdev: file %s: size %d is not a multiple of %d", path, size, BlockSize)
	}
	flags := unix.O_RDWR | unix.O_CLOEXEC
	if readOnly {
		flags = unix.O_RDONLY | unix.O_CLOEXEC
	}
	created := false
	fd, err := unix.Open(path, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		switch {
		case size == 0:
			return nil, fmt.Errorf("blockdev: file %s does not exist, and no size was given to create it with", path)
		case readOnly:
			return nil, fmt.Errorf("blockdev: file %s does not exist, and a read-only store is not created", path)
		}
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, syscallError("open(O_CREAT|O_EXCL)", path, err)
		}
		created = true
		if err := unix.Ftruncate(fd, size); err != nil {
			closeFD(fd)
			unix.Unlink(path)
			return nil, syscallError(fmt.Sprintf("ftruncate(%d)", size), path, err)
		}
	} else if err != nil {
		return nil, syscallError("open", path, err)
	}
	f := &File{s: mapped{path: path, kind: "file", fd: fd, readOnly: readOnly, grain: pageSize}}
	if err := f.open(size); err != nil {
		closeFD(fd)
		if created {
			unix.Unlink(path)
		}
		return nil, err
	}
	return f, nil
}

func (f *File) open(size int64) error {
	s := &f.s
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return syscallError("fstat", s.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("blockdev: %s is not a regular file (mode %v)", s.path, fileType(st.Mode))
	}
	switch {
	case st.Size == 0:
		return fmt.Errorf("blockdev: file %s is empty", s.path)
	case st.Size%BlockSize != 0:
		return fmt.Errorf("blockdev: file %s has %d octets, not a multiple of %d", s.path, st.Size, BlockSize)
	case size != 0 && size != st.Size:
		return fmt.Errorf("blockdev: file %s has %d octets, not the configured %d (a store never truncates or grows a file: resize it yourself or configure its size)", s.path, st.Size, size)
	}
	if err := s.mapShared(&st, st.Size); err != nil {
		return err
	}
	s.punch.Store(!s.readOnly && canPunch(s.fd, st.Size))
	var fs unix.Statfs_t
	if unix.Fstatfs(s.fd, &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		s.copyMax, s.inMemory = tmpfsCopyMax, true
	}
	return nil
}

// tmpfsCopyMax: on tmpfs, writes of up to 3 pages are stored through the
// mapping. A page already mapped costs nothing; one not yet mapped costs a
// fault, about 4 small pwrites.
const tmpfsCopyMax = 3 * 4096

// canPunch finds out whether the file system punches holes by punching one
// octet inside a hole that is already there, which changes nothing. A file
// without holes cannot tell: then it is assumed to punch, and the first
// Discard that fails with EOPNOTSUPP turns Thin false.
func canPunch(fd int, size int64) bool {
	off, err := unix.Seek(fd, 0, unix.SEEK_HOLE)
	if err != nil || off >= size { // the end of a file counts as a hole
		return true
	}
	err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, 1)
	return !errors.Is(err, unix.EOPNOTSUPP)
}

// Path returns the file's path.
func (f *File) Path() string { return f.s.path }

// Mapping implements Store.
func (f *File) Mapping() *mem.Mapping { return f.s.m }

// Size implements Store.
func (f *File) Size() int64 { return f.s.size() }

// ReadOnly implements Store.
func (f *File) ReadOnly() bool { return f.s.readOnly }

// Thin implements Store: true while the file system punches holes.
func (f *File) Thin() bool { return !f.s.readOnly && f.s.punch.Load() }

// ReadAt implements Store: pread(2).
func (f *File) ReadAt(p []byte, off int64) error { return f.s.readAt(p, off) }

// WriteAt implements Store with pwrite(2) (see mapped.writeAt).
func (f *File) WriteAt(p []byte, off int64) error { return f.s.writeAt(p, off) }

// Sync implements Store with msync(MS_SYNC) of the range, which on Linux
// is fdatasync limited to it: see mapped.sync.
func (f *File) Sync(off, n int64) error { return f.s.sync(off, n) }

// Discard implements Store: holes punched in whole pages, the partial
// pages at the edges zeroed.
func (f *File) Discard(off, n int64) error { return f.s.discard(off, n) }

// InMemory implements InMemory: true for a file on tmpfs.
func (f *File) InMemory() bool { return f.s.inMemory }

// Close implements Store. It fails, and the store stays open, while memory
// regions are registered in the mapping.
func (f *File) Close() error { return f.s.close() }
