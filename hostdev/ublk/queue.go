package ublk

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/hostdev/uring"
	"golang.org/x/sys/unix"
)

// pollTag marks the eventfd poll's completions.
const pollTag = 1 << 63

// queue serves one queue of a device. One locked OS thread issues every
// command of the queue, as ublk requires (the kernel checks that
// COMMIT_AND_FETCH_REQ comes from the task that fetched); each request
// executes on a goroutine of its own, against the remote LUN, and hands
// its result back through a list and an eventfd that the thread polls in
// its ring.
type queue struct {
	d     *Device
	id    uint16
	lun   *nbd.LUN
	ctx   context.Context
	descs []byte // the queue's I/O descriptors, mmap'd from /dev/ublkcN
	done  chan struct{}
	err   error

	evfd    int
	mu      sync.Mutex
	results []result
}

type result struct {
	tag uint16
	res int32
}

func (q *queue) buf(tag uint16) []byte {
	n, i := q.d.opts.MaxIO, int(q.id)*q.d.depth+int(tag)
	return q.d.bufs[i*n : (i+1)*n]
}

func (q *queue) ioCmd(r *uring.Ring, op uint32, tag uint16, res int32) error {
	e, err := r.SQE()
	if err != nil {
		return err
	}
	var b [IOCmdLen]byte
	c := IOCmd{QueueID: q.id, Tag: tag, Result: res, Addr: uint64(uintptr(unsafe.Pointer(&q.buf(tag)[0])))}
	uring.PutCmd(e, q.d.cdev, op, uint64(tag), c.Encode(b[:]))
	return nil
}

func (q *queue) armPoll(r *uring.Ring) error {
	e, err := r.SQE()
	if err != nil {
		return err
	}
	uring.PutPoll(e, q.evfd, pollTag)
	return nil
}

// run fetches every tag, reports on started, and serves until every tag
// is aborted (the device stopped).
func (q *queue) run(started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the queue
	depth := q.d.depth
	r, err := uring.New(uint32(2*depth), uring.SetupSQE128)
	if err != nil {
		started <- err
		return
	}
	defer r.Close()
	q.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		started <- fmt.Errorf("ublk: eventfd: %w", err)
		return
	}
	defer unix.Close(q.evfd)
	for tag := range depth {
		if err := q.ioCmd(r, IOFetchReq, uint16(tag), 0); err != nil {
			started <- err
			return
		}
	}
	if err := q.armPoll(r); err != nil {
		started <- err
		return
	}
	if err := r.Enter(0); err != nil {
		started <- fmt.Errorf("ublk: FETCH_REQ: %w", err)
		return
	}
	started <- nil

	active := depth // tags with a command in the kernel or a request here
	for active > 0 {
		if err := r.Enter(1); err != nil {
			q.err = err
			q.d.log.Errorf("%s: %v", q.d.Path, err)
			return
		}
		polled := false
		r.Reap(func(ud uint64, res int32) {
			if ud == pollTag {
				polled = true
				return
			}
			tag := uint16(ud)
			switch {
			case res == IOResOK:
				desc, _ := ParseIODesc(q.descs[int(tag)*descLen:])
				go q.handle(tag, desc)
			case res == IOResAbort:
				active--
			default:
				q.d.log.Errorf("%s: queue %d, tag %d: the kernel answered %v", q.d.Path, q.id, tag, syscall.Errno(-res))
				active--
			}
		})
		if !polled {
			continue
		}
		var b [8]byte
		unix.Read(q.evfd, b[:])
		q.mu.Lock()
		done := q.results
		q.results = nil
		q.mu.Unlock()
		for _, c := range done {
			if err := q.ioCmd(r, IOCommitAndFetchReq, c.tag, c.res); err != nil {
				q.err = err
				return
			}
		}
		if err := q.armPoll(r); err != nil {
			q.err = err
			return
		}
	}
}

// handle executes one request and queues its result for the thread.
func (q *queue) handle(tag uint16, d IODesc) {
	res := q.execute(tag, d)
	q.mu.Lock()
	q.results = append(q.results, result{tag, res})
	q.mu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(q.evfd, one[:])
}

// execute maps a request to the LUN: the result is the octets
// transferred for a read or write, 0 for the others, or -errno.
func (q *queue) execute(tag uint16, d IODesc) int32 {
	off, n := int64(d.StartSector)<<9, int64(d.NrSectors)<<9
	var err error
	switch d.Op() {
	case OpRead:
		if n > int64(q.d.opts.MaxIO) {
			return -int32(unix.EINVAL)
		}
		err = q.lun.ReadInto(q.ctx, q.buf(tag)[:n], off)
	case OpWrite:
		if n > int64(q.d.opts.MaxIO) {
			return -int32(unix.EINVAL)
		}
		err = q.lun.WriteFrom(q.ctx, q.buf(tag)[:n], off)
		if err == nil && d.Flags()&IOFlagFUA != 0 {
			err = q.lun.Sync(q.ctx)
		}
	case OpFlush:
		err = q.lun.Sync(q.ctx)
	case OpDiscard:
		err = q.lun.Discard(q.ctx, off, n)
	case OpWriteZeroes:
		err = q.lun.WriteZeroes(q.ctx, off, n, d.Flags()&IOFlagNoUnmap == 0)
	default:
		return -int32(unix.EOPNOTSUPP)
	}
	if err != nil {
		q.d.log.Warnf("%s: %s of %d octets at %d: %v", q.d.Path, OpName(d.Op()), n, off, err)
		return -int32(remote.Errno(err))
	}
	if d.Op() == OpRead || d.Op() == OpWrite {
		return int32(n)
	}
	return 0
}
