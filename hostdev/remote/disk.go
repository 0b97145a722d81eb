// Package remote makes a LUN of an iSER session usable as a byte-addressed
// disk on the initiator host: reads and writes of any offset and length
// become SCSI READ(16) and WRITE(16) of whole blocks, fsync becomes
// SYNCHRONIZE CACHE. Data moves through registered buffer slots, so a read
// is placed by the target straight into the slot that answers the caller.
package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// Disk is one LUN of a session. Its methods are safe for concurrent use.
type Disk struct {
	s     *initiator.Session
	lun   uint16
	size  int64
	bs    int
	ro    bool
	slots *Slots
	// rmw orders writes that must read-modify-write a partial block
	// against every other write: they take it exclusively, aligned writes
	// share it, so two writes to different bytes of one block never lose
	// each other's data.
	rmw sync.RWMutex
}

// Open reads the LUN's capacity and write protection and returns it as a
// Disk whose I/O goes through slots.
func Open(ctx context.Context, s *initiator.Session, lun uint16, slots *Slots) (*Disk, error) {
	blocks, bs, err := ReadCapacity(ctx, s, lun)
	if err != nil {
		return nil, fmt.Errorf("LUN %d: READ CAPACITY: %w", lun, err)
	}
	if bs < 512 || bs > 64<<10 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("LUN %d: block size %d is not a power of two in 512..65536", lun, bs)
	}
	if int(bs) > slots.Size()/2 {
		return nil, fmt.Errorf("LUN %d: block size %d does not fit buffer slots of %d octets", lun, bs, slots.Size())
	}
	ro, err := writeProtected(ctx, s, lun)
	if err != nil {
		return nil, fmt.Errorf("LUN %d: MODE SENSE: %w", lun, err)
	}
	return &Disk{s: s, lun: lun, size: int64(blocks) * int64(bs), bs: int(bs), ro: ro, slots: slots}, nil
}

// LUN is the disk's logical unit number.
func (d *Disk) LUN() uint16 { return d.lun }

// Size is the disk's size in octets.
func (d *Disk) Size() int64 { return d.size }

// BlockSize is the LUN's logical block size.
func (d *Disk) BlockSize() int { return d.bs }

// ReadOnly says whether the target write-protects the LUN.
func (d *Disk) ReadOnly() bool { return d.ro }

// Slots are the buffer slots the disk's I/O goes through.
func (d *Disk) Slots() *Slots { return d.slots }

// MaxIO is the longest read or write the disk takes at once.
func (d *Disk) MaxIO() int { return d.slots.Size() - 2*d.bs }

// span is the block-aligned range [a, b) covering [off, off+n).
func (d *Disk) span(off int64, n int) (a, b int64) {
	bs := int64(d.bs)
	return off / bs * bs, (off + int64(n) + bs - 1) / bs * bs
}

// check validates an I/O of n octets at off against the disk: reads past
// the end are cut short (io.EOF when nothing is left), writes past the end
// fail with ENOSPC as on a block device.
func (d *Disk) check(off int64, n int, write bool) (int, error) {
	switch {
	case off < 0:
		return 0, syscall.EINVAL
	case n > d.MaxIO():
		return 0, fmt.Errorf("remote: I/O of %d octets is longer than %d: %w", n, d.MaxIO(), syscall.EINVAL)
	case off >= d.size && n > 0:
		if write {
			return 0, syscall.ENOSPC
		}
		return 0, io.EOF
	case off+int64(n) > d.size:
		if write {
			return 0, syscall.ENOSPC
		}
		return int(d.size - off), nil
	}
	return n, nil
}

// Read reads up to n octets at off into a slot and returns the slot; its
// Bytes are the data, valid until Release. A read past the end returns
// fewer octets, io.EOF when there are none.
func (d *Disk) Read(ctx context.Context, off int64, n int) (*Slot, error) {
	n, err := d.check(off, n, false)
	if err != nil {
		return nil, err
	}
	sl, err := d.slots.get(ctx)
	if err != nil {
		return nil, err
	}
	if sl.data, err = d.readChecked(ctx, sl, off, n); err != nil {
		sl.Release()
		return nil, err
	}
	return sl, nil
}

// ReadInto is Read into a slot the caller holds (Slots.TryTake): the data
// are returned as a part of the slot's buffer, which the read overwrites
// from its start.
func (d *Disk) ReadInto(ctx context.Context, sl *Slot, off int64, n int) ([]byte, error) {
	n, err := d.check(off, n, false)
	if err != nil {
		return nil, err
	}
	return d.readChecked(ctx, sl, off, n)
}

// readChecked reads n octets at off, which check has passed, into sl.
func (d *Disk) readChecked(ctx context.Context, sl *Slot, off int64, n int) ([]byte, error) {
	a, b := d.span(off, n)
	if err := d.io(ctx, sl, scsi.Read16, a, sl.buf[:b-a]); err != nil {
		return nil, err
	}
	return sl.buf[off-a : off-a+int64(n)], nil
}

// ReadAt reads into p, copying from the slot: for callers that have their
// own buffer (tests, tools). It follows io.ReaderAt: a read across the end
// returns what there is and io.EOF (from Read, on the next piece).
func (d *Disk) ReadAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		sl, err := d.Read(context.Background(), off+int64(done), min(len(p)-done, d.MaxIO()))
		if err != nil {
			return done, err
		}
		done += copy(p[done:], sl.Bytes())
		sl.Release()
	}
	return done, nil
}

// Write writes the concatenation of bufs at off. Partial blocks at either
// end are read, patched and written back under the exclusive rmw lock.
func (d *Disk) Write(ctx context.Context, off int64, bufs ...[]byte) (int, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if d.ro {
		return 0, syscall.EROFS
	}
	if _, err := d.check(off, n, true); err != nil || n == 0 {
		return 0, err
	}
	sl, err := d.slots.get(ctx)
	if err != nil {
		return 0, err
	}
	defer sl.Release()
	a, b := d.span(off, n)
	if a == off && b == off+int64(n) {
		d.rmw.RLock()
		defer d.rmw.RUnlock()
	} else {
		d.rmw.Lock()
		defer d.rmw.Unlock()
		bs := int64(d.bs)
		if a != off {
			if err := d.io(ctx, sl, scsi.Read16, a, sl.buf[:bs]); err != nil {
				return 0, err
			}
		}
		if e := off + int64(n); e != b && (b-bs != a || a == off) {
			if err := d.io(ctx, sl, scsi.Read16, b-bs, sl.buf[b-bs-a:b-a]); err != nil {
				return 0, err
			}
		}
	}
	p := sl.buf[off-a:]
	for _, b := range bufs {
		p = p[copy(p, b):]
	}
	if err := d.io(ctx, sl, scsi.Write16, a, sl.buf[:b-a]); err != nil {
		return 0, err
	}
	return n, nil
}

// WriteFrom is Write of p, which lies in the buffer of slot sl that the
// caller holds (Slots.TryTake): whole blocks at a block boundary are written
// from there, with no copy; anything else is written as Write writes it,
// through a slot of the pool.
func (d *Disk) WriteFrom(ctx context.Context, sl *Slot, off int64, p []byte) (int, error) {
	bs := int64(d.bs)
	if d.ro || off%bs != 0 || int64(len(p))%bs != 0 || len(p) == 0 || !sl.holds(p) {
		return d.Write(ctx, off, p)
	}
	if _, err := d.check(off, len(p), true); err != nil {
		return 0, err
	}
	d.rmw.RLock()
	defer d.rmw.RUnlock()
	if err := d.io(ctx, sl, scsi.Write16, off, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt follows io.WriterAt.
func (d *Disk) WriteAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		k := min(len(p)-done, d.MaxIO()-d.bs)
		n, err := d.Write(context.Background(), off+int64(done), p[done:done+k])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Sync makes every completed write durable: SYNCHRONIZE CACHE(10) of the
// whole LUN.
func (d *Disk) Sync(ctx context.Context) error {
	sl, err := d.slots.get(ctx)
	if err != nil {
		return err
	}
	defer sl.Release()
	cdb := sl.cdb[:10]
	clear(cdb)
	cdb[0] = scsi.SynchronizeCache10
	return d.do(ctx, sl, cdb, initiator.NoData, nil)
}

// io runs one READ(16) or WRITE(16) of buf at octet offset a.
func (d *Disk) io(ctx context.Context, sl *Slot, op byte, a int64, buf []byte) error {
	cdb := sl.cdb[:16]
	clear(cdb)
	cdb[0] = op
	binary.BigEndian.PutUint64(cdb[2:], uint64(a/int64(d.bs)))
	binary.BigEndian.PutUint32(cdb[10:], uint32(len(buf)/d.bs))
	dir := initiator.DataIn
	if op == scsi.Write16 {
		dir = initiator.DataOut
	}
	return d.do(ctx, sl, cdb, dir, buf)
}

// busyRetries and busyWait bound how long a command the target answers
// BUSY or TASK SET FULL is retried.
const (
	busyRetries = 50
	busyWait    = 20 * time.Millisecond
)

// do runs a command in the slot's Command and maps its outcome to an
// errno-bearing error.
func (d *Disk) do(ctx context.Context, sl *Slot, cdb []byte, dir initiator.Direction, buf []byte) error {
	cmd := &sl.cmd
	for try := 0; ; try++ {
		cmd.LUN, cmd.CDB, cmd.Dir, cmd.Data = d.lun, cdb, dir, buf
		if err := d.s.Do(ctx, cmd); err != nil {
			return &IOError{Op: cdb[0], Err: err, Errno: syscall.EIO}
		}
		switch cmd.Status {
		case scsi.StatusGood:
			return nil
		case scsi.StatusBusy, scsi.StatusTaskSetFull:
			if try < busyRetries {
				time.Sleep(busyWait)
				continue
			}
		}
		return &IOError{Op: cdb[0], Err: &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}, Errno: senseErrno(cmd.Status, cmd.Sense)}
	}
}

// senseErrno maps a failed command's status and sense key to the errno a
// program sees.
func senseErrno(status uint8, sense []byte) syscall.Errno {
	if status != scsi.StatusCheckCondition || len(sense) < 3 {
		return syscall.EIO
	}
	switch sense[2] & 0xf {
	case scsi.SenseDataProtect:
		return syscall.EROFS
	case scsi.SenseIllegalRequest:
		return syscall.EINVAL
	}
	return syscall.EIO
}

// IOError is a command that failed: the SCSI operation, why, and the errno
// that stands for it.
type IOError struct {
	Op    byte
	Err   error
	Errno syscall.Errno
}

func (e *IOError) Error() string { return fmt.Sprintf("remote: SCSI op %#02x: %v", e.Op, e.Err) }
func (e *IOError) Unwrap() error { return e.Err }

// Is lets errors.Is(err, syscall.EIO) and the like match.
func (e *IOError) Is(target error) bool { return target == e.Errno }

// Errno is the errno for err: its own if it carries one, else EIO.
func Errno(err error) syscall.Errno {
	var e *IOError
	if errors.As(err, &e) {
		return e.Errno
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		return n
	}
	return syscall.EIO
}
