package blockdev

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"golang.org/x/sys/unix"
)

// Device is a Store over a block device, mapped shared.
type Device struct {
	s    mapped
	thin bool // the device discards and zeroes in the same request
}

// OpenDevice opens the block device at path as a store of its whole size
// (ioctl BLKGETSIZE64). Opened for writing, the device is claimed
// exclusively (O_EXCL): opening fails with EBUSY while it is mounted or
// claimed by another store, a device mapper or md, so a mounted disk is
// never exported writable, and a reload must close a device's store
// before it opens it again.
func OpenDevice(path string, readOnly bool) (*Device, error) {
	flags := unix.O_RDWR | unix.O_EXCL | unix.O_CLOEXEC
	if readOnly {
		flags = unix.O_RDONLY | unix.O_CLOEXEC
	}
	fd, err := unix.Open(path, flags, 0)
	if errors.Is(err, unix.EBUSY) {
		return nil, fmt.Errorf("blockdev: open(O_EXCL) %s: %w (mounted, or in use by another store or driver)", path, err)
	} else if err != nil {
		return nil, syscallError("open", path, err)
	}
	d := &Device{s: mapped{path: path, kind: "block device", fd: fd, readOnly: readOnly}}
	if err := d.open(); err != nil {
		closeFD(fd)
		return nil, err
	}
	return d, nil
}

func (d *Device) open() error {
	s := &d.s
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return syscallError("fstat", s.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("blockdev: %s is not a block device (mode %v)", s.path, fileType(st.Mode))
	}
	var size uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); errno != 0 {
		return syscallError("ioctl(BLKGETSIZE64)", s.path, errno)
	}
	switch {
	case size == 0:
		return fmt.Errorf("blockdev: block device %s has no capacity (an unattached loop device?)", s.path)
	case size%BlockSize != 0 || size > 1<<62:
		return fmt.Errorf("blockdev: block device %s has %d octets, not a multiple of %d", s.path, size, BlockSize)
	}
	lbs, err := unix.IoctlGetInt(s.fd, unix.BLKSSZGET)
	if err != nil {
		return syscallError("ioctl(BLKSSZGET)", s.path, err)
	}
	s.grain = max(pageSize, int64(lbs))
	if err := s.mapShared(&st, int64(size)); err != nil {
		return err
	}
	s.punch.Store(!s.readOnly)
	d.thin = !s.readOnly && discardsZeroes(st.Rdev)
	return nil
}

// discardsZeroes reports whether the block device rdev both discards and
// zeroes with unmapping allowed (its queue's discard_max_bytes and
// write_zeroes_max_bytes in sysfs are not 0), so that a punched range is
// deallocated and reads zeros. A partition's queue is its disk's.
func discardsZeroes(rdev uint64) bool {
	dir := fmt.Sprintf("/sys/dev/block/%d:%d/", unix.Major(rdev), unix.Minor(rdev))
	q := dir + "queue/"
	if _, err := os.Stat(q); err != nil {
		q = dir + "../queue/"
	}
	positive := func(name string) bool {
		b, err := os.ReadFile(q + name)
		if err != nil {
			return false
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return err == nil && n > 0
	}
	return positive("discard_max_bytes") && positive("write_zeroes_max_bytes")
}

// Path returns the device's path.
func (d *Device) Path() string { return d.s.path }

// Mapping implements Store.
func (d *Device) Mapping() *mem.Mapping { return d.s.m }

// Size implements Store.
func (d *Device) Size() int64 { return d.s.size() }

// ReadOnly implements Store.
func (d *Device) ReadOnly() bool { return d.s.readOnly }

// Thin implements Store: the device deallocates what Discard punches.
func (d *Device) Thin() bool { return d.thin && d.s.punch.Load() }

// ReadAt implements Store: pread(2).
func (d *Device) ReadAt(p []byte, off int64) error { return d.s.readAt(p, off) }

// WriteAt implements Store with pwrite(2) (see mapped.writeAt).
func (d *Device) WriteAt(p []byte, off int64) error { return d.s.writeAt(p, off) }

// Sync implements Store with msync(MS_SYNC) of the range: the block
// device's fsync (blkdev_fsync) writes the range's pages back and flushes
// the device's volatile cache, as fdatasync would, without writing back
// the rest of the device.
func (d *Device) Sync(off, n int64) error { return d.s.sync(off, n) }

// Discard implements Store: fallocate(PUNCH_HOLE) of the whole pages (or
// logical blocks, when larger), which the kernel turns into a write-zeroes
// request that may deallocate, and zeros through the mapping at the edges
// and where the device cannot. BLKDISCARD is not used: after it, reads are
// not guaranteed to return zeros.
func (d *Device) Discard(off, n int64) error { return d.s.discard(off, n) }

// Close implements Store. It fails, and the store stays open, while memory
// regions are registered in the mapping.
func (d *Device) Close() error { return d.s.close() }
