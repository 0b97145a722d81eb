package ublk

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The part of io_uring a ublk server needs, as raw system calls:
// io_uring_setup with 128-octet SQEs (ublk's control commands do not fit
// in 64), the two rings and the SQE array mmap'd, io_uring_enter to
// submit and wait. No Go io_uring library is served here
// (.library/env/packages lists none), and what is needed is this one
// file: URING_CMD, POLL_ADD for an eventfd, and NOP for the tests.

const (
	setupSQE128 = 1 << 10

	opNop      = 0
	opPollAdd  = 6
	opURingCmd = 46

	enterGetEvents = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	sqeSize = 128
	cqeSize = 16

	// Offsets in an SQE.
	sqeOpcode   = 0
	sqeFD       = 4
	sqeOff      = 8 // a URING_CMD's cmd_op
	sqeAddr     = 16
	sqeLen      = 24
	sqeOpFlags  = 28 // poll32_events
	sqeUserData = 32
	sqeCmd      = 48 // a URING_CMD's command, 80 octets with SQE128
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// ring is one io_uring. It is not safe for concurrent use: ublk wants
// every command of a queue issued by one thread anyway.
type ring struct {
	fd           int
	sq, cq, sqes []byte
	sqHead       *uint32
	sqTail       *uint32
	sqMask       uint32
	sqArray      unsafe.Pointer
	cqHead       *uint32
	cqTail       *uint32
	cqMask       uint32
	cqes         unsafe.Pointer
	entries      uint32
}

func newRing(entries uint32) (*ring, error) {
	var p params
	p.flags = setupSQE128
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, os.NewSyscallError("io_uring_setup", errno)
	}
	r := &ring{fd: int(fd), entries: p.sqEntries}
	var err error
	r.sq, err = unix.Mmap(r.fd, offSQRing, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err == nil {
		r.cq, err = unix.Mmap(r.fd, offCQRing, int(p.cqOff.cqes+p.cqEntries*cqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err == nil {
		r.sqes, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring: mmap: %w", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.sq, p.sqOff.head), u32(r.sq, p.sqOff.tail), *u32(r.sq, p.sqOff.ringMask)
	r.sqArray = unsafe.Pointer(&r.sq[p.sqOff.array])
	r.cqHead, r.cqTail, r.cqMask = u32(r.cq, p.cqOff.head), u32(r.cq, p.cqOff.tail), *u32(r.cq, p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&r.cq[p.cqOff.cqes])
	return r, nil
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sq, r.cq, r.sqes} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	r.sq, r.cq, r.sqes = nil, nil, nil
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// errRingFull: every SQE is queued and not yet taken by the kernel.
var errRingFull = errors.New("io_uring: submission queue full")

// sqe returns the next free SQE, zeroed, and queues it: it goes to the
// kernel with the next enter.
func (r *ring) sqe() ([]byte, error) {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= r.entries {
		return nil, errRingFull
	}
	i := tail & r.sqMask
	e := r.sqes[i*sqeSize : (i+1)*sqeSize]
	clear(e)
	*(*uint32)(unsafe.Add(r.sqArray, 4*i)) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	return e, nil
}

// enter submits what is queued and waits for at least wait completions.
// An interrupted wait (the Go runtime's preemption signals) is retried.
func (r *ring) enter(wait uint32) error {
	for {
		n := *r.sqTail - atomic.LoadUint32(r.sqHead)
		flags := uintptr(0)
		if wait > 0 {
			flags = enterGetEvents
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(wait), flags, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			if wait > 0 && r.ready() > 0 {
				return nil
			}
			continue
		}
		return os.NewSyscallError("io_uring_enter", errno)
	}
}

// ready is the number of completions waiting.
func (r *ring) ready() uint32 {
	return atomic.LoadUint32(r.cqTail) - *r.cqHead
}

// reap hands each waiting completion to f and frees its slot.
func (r *ring) reap(f func(userData uint64, res int32)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize)
		f(*(*uint64)(c), *(*int32)(unsafe.Add(c, 8)))
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// putCmd fills a URING_CMD SQE: cmd_op on fd, with cmd in the SQE's
// command area.
func putCmd(e []byte, fd int, op uint32, userData uint64, cmd []byte) {
	e[sqeOpcode] = opURingCmd
	*(*int32)(unsafe.Pointer(&e[sqeFD])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&e[sqeOff])) = op
	*(*uint64)(unsafe.Pointer(&e[sqeUserData])) = userData
	copy(e[sqeCmd:], cmd)
}

// putPoll fills a one-shot POLL_ADD SQE for POLLIN on fd.
func putPoll(e []byte, fd int, userData uint64) {
	e[sqeOpcode] = opPollAdd
	*(*int32)(unsafe.Pointer(&e[sqeFD])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&e[sqeOpFlags])) = unix.POLLIN
	*(*uint64)(unsafe.Pointer(&e[sqeUserData])) = userData
}
