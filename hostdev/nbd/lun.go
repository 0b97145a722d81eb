package nbd

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// LUN is a remote disk with what a kernel block device asks of it beyond
// reads, writes and flushes: discard (SCSI UNMAP) and write zeroes (WRITE
// SAME(16) of a zero block). hostdev/ublk serves the same operations from
// it.
type LUN struct {
	*remote.Disk
	s *initiator.Session
}

// NewLUN pairs a disk with the session it is a LUN of.
func NewLUN(s *initiator.Session, d *remote.Disk) *LUN { return &LUN{Disk: d, s: s} }

// Limits on one command, within what transport/lu's Block Limits VPD page
// reports (MAXIMUM UNMAP LBA COUNT 1<<20, MAXIMUM WRITE SAME LENGTH 1<<16).
const (
	maxUnmapBlocks     = 1 << 20
	maxWriteSameBlocks = 1 << 16
)

// blocks converts an octet range to whole blocks; a range that is not
// block-aligned is refused (the kernel sends only aligned ones).
func (l *LUN) blocks(off, n int64) (lba, count int64, err error) {
	bs := int64(l.BlockSize())
	if off < 0 || n < 0 || off%bs != 0 || n%bs != 0 {
		return 0, 0, fmt.Errorf("nbd: range [%d, +%d) is not in whole %d-octet blocks: %w", off, n, bs, syscall.EINVAL)
	}
	if off+n > l.Size() {
		return 0, 0, syscall.ENOSPC
	}
	return off / bs, n / bs, nil
}

// Discard unmaps [off, off+n): SCSI UNMAP, one descriptor per command.
// Reads of the range return zeroes afterwards on a thin LUN.
func (l *LUN) Discard(ctx context.Context, off, n int64) error {
	if l.ReadOnly() {
		return syscall.EROFS
	}
	lba, count, err := l.blocks(off, n)
	if err != nil || count == 0 {
		return err
	}
	buf, err := l.s.Alloc(24)
	if err != nil {
		return err
	}
	defer l.s.Free(buf)
	for count > 0 {
		k := min(count, maxUnmapBlocks)
		p := buf[:24]
		clear(p)
		binary.BigEndian.PutUint16(p[0:], 22) // UNMAP DATA LENGTH: what follows
		binary.BigEndian.PutUint16(p[2:], 16) // BLOCK DESCRIPTOR DATA LENGTH
		binary.BigEndian.PutUint64(p[8:], uint64(lba))
		binary.BigEndian.PutUint32(p[16:], uint32(k))
		cdb := []byte{scsi.Unmap, 0, 0, 0, 0, 0, 0, 0, 24, 0}
		if err := l.run(ctx, cdb, initiator.DataOut, p); err != nil {
			return err
		}
		lba, count = lba+k, count-k
	}
	return nil
}

// WriteZeroes writes zeroes over [off, off+n) with WRITE SAME(16) of one
// zero block; with unmap the target may deallocate the range instead
// (the UNMAP bit), which on a thin LUN reads back as zeroes too.
func (l *LUN) WriteZeroes(ctx context.Context, off, n int64, unmap bool) error {
	if l.ReadOnly() {
		return syscall.EROFS
	}
	lba, count, err := l.blocks(off, n)
	if err != nil || count == 0 {
		return err
	}
	bs := l.BlockSize()
	zero, err := l.s.Alloc(bs)
	if err != nil {
		return err
	}
	defer l.s.Free(zero)
	zero = zero[:bs]
	clear(zero)
	for count > 0 {
		k := min(count, maxWriteSameBlocks)
		cdb := make([]byte, 16)
		cdb[0] = scsi.WriteSame16
		if unmap {
			cdb[1] = 0x08
		}
		binary.BigEndian.PutUint64(cdb[2:], uint64(lba))
		binary.BigEndian.PutUint32(cdb[10:], uint32(k))
		if err := l.run(ctx, cdb, initiator.DataOut, zero); err != nil {
			return err
		}
		lba, count = lba+k, count-k
	}
	return nil
}

// run runs one command on the LUN; a status other than GOOD is an error
// that carries the errno remote.Errno finds for it.
func (l *LUN) run(ctx context.Context, cdb []byte, dir initiator.Direction, data []byte) error {
	cmd := &initiator.Command{LUN: l.LUN(), CDB: cdb, Dir: dir, Data: data}
	if err := remote.Run(ctx, l.s, cmd); err != nil {
		errno := syscall.EIO
		if se, ok := err.(*initiator.StatusError); ok && se.Status == scsi.StatusCheckCondition && len(se.Sense) > 2 {
			switch se.Sense[2] & 0xf {
			case scsi.SenseDataProtect:
				errno = syscall.EROFS
			case scsi.SenseIllegalRequest:
				errno = syscall.EOPNOTSUPP
			}
		}
		return &remote.IOError{Op: cdb[0], Err: err, Errno: errno}
	}
	return nil
}

// ReadInto reads [off, off+len(p)) into p through the disk's slots, in
// pieces of at most MaxIO octets.
func (l *LUN) ReadInto(ctx context.Context, p []byte, off int64) error {
	for done := 0; done < len(p); {
		sl, err := l.Read(ctx, off+int64(done), min(len(p)-done, l.MaxIO()))
		if err != nil {
			return err
		}
		done += copy(p[done:], sl.Bytes())
		sl.Release()
	}
	return nil
}

// WriteFrom writes p at off, in pieces that fit a slot.
func (l *LUN) WriteFrom(ctx context.Context, p []byte, off int64) error {
	step := l.MaxIO() - l.BlockSize()
	for done := 0; done < len(p); {
		k := min(len(p)-done, step)
		if _, err := l.Write(ctx, off+int64(done), p[done:done+k]); err != nil {
			return err
		}
		done += k
	}
	return nil
}
