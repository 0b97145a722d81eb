// Package uring is the part of io_uring that this module's kernel servers
// (hostdev/ublk, hostdev/lunfs's FUSE-over-io_uring transport) need, as raw
// system calls over golang.org/x/sys/unix: io_uring_setup with the flags
// they ask for (128-octet SQEs carry a URING_CMD's command, 32-octet CQEs
// its larger result), the two rings and the SQE array mmap'd, and
// io_uring_enter to submit and to wait. No Go io_uring library is served
// here (.library/env/packages lists none), and this one file is all that
// is needed: URING_CMD, POLL_ADD or READ for an eventfd, and NOP.
//
// A Ring is not safe for concurrent use as a whole, but its two sides are
// independent: one goroutine at a time may fill SQEs and Submit, while
// another (one at a time) Waits and Reaps.
package uring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags (IORING_SETUP_*).
const (
	SetupSQE128 = 1 << 10 // 128-octet SQEs: 80 octets of URING_CMD command
	SetupCQE32  = 1 << 11 // 32-octet CQEs: 16 octets of extra result
)

// Opcodes (IORING_OP_*).
const (
	OpNop      = 0
	OpPollAdd  = 6
	OpRead     = 22
	OpURingCmd = 46
)

// Offsets in an SQE.
const (
	SQEOpcode   = 0
	SQEFD       = 4
	SQEOff      = 8 // the file offset; a URING_CMD's cmd_op
	SQEAddr     = 16
	SQELen      = 24
	SQEOpFlags  = 28 // poll32_events
	SQEUserData = 32
	SQECmd      = 48 // a URING_CMD's command: 16 octets, 80 with SetupSQE128
)

const (
	enterGetEvents = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
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

// Ring is one io_uring.
type Ring struct {
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
	sqeSize      uint32
	cqeSize      uint32
}

// New sets up a ring of at least entries SQEs (the kernel rounds up to a
// power of two) with the Setup flags given.
func New(entries, flags uint32) (*Ring, error) {
	var p params
	p.flags = flags
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, os.NewSyscallError("io_uring_setup", errno)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries, sqeSize: 64, cqeSize: 16}
	if flags&SetupSQE128 != 0 {
		r.sqeSize = 128
	}
	if flags&SetupCQE32 != 0 {
		r.cqeSize = 32
	}
	var err error
	r.sq, err = unix.Mmap(r.fd, offSQRing, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err == nil {
		r.cq, err = unix.Mmap(r.fd, offCQRing, int(p.cqOff.cqes+p.cqEntries*r.cqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err == nil {
		r.sqes, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries*r.sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: mmap: %w", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.sq, p.sqOff.head), u32(r.sq, p.sqOff.tail), *u32(r.sq, p.sqOff.ringMask)
	r.sqArray = unsafe.Pointer(&r.sq[p.sqOff.array])
	r.cqHead, r.cqTail, r.cqMask = u32(r.cq, p.cqOff.head), u32(r.cq, p.cqOff.tail), *u32(r.cq, p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&r.cq[p.cqOff.cqes])
	return r, nil
}

// Close unmaps the rings and closes the ring's descriptor; the kernel
// cancels what is still in flight.
func (r *Ring) Close() {
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

// Entries is the number of SQEs.
func (r *Ring) Entries() uint32 { return r.entries }

// ErrFull: every SQE is queued and not yet taken by the kernel.
var ErrFull = errors.New("io_uring: submission queue full")

// SQE returns the next free SQE, zeroed, and queues it: it goes to the
// kernel with the next Submit or Enter.
func (r *Ring) SQE() ([]byte, error) {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= r.entries {
		return nil, ErrFull
	}
	i := tail & r.sqMask
	e := r.sqes[i*r.sqeSize : (i+1)*r.sqeSize]
	clear(e)
	*(*uint32)(unsafe.Add(r.sqArray, 4*i)) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	return e, nil
}

// Enter submits what is queued and waits for at least wait completions.
// An interrupted wait (the Go runtime's preemption signals) is retried.
func (r *Ring) Enter(wait uint32) error {
	return r.enter(*r.sqTail-atomic.LoadUint32(r.sqHead), wait)
}

// Submit hands what is queued to the kernel without waiting.
func (r *Ring) Submit() error { return r.Enter(0) }

// Wait waits for at least n completions and submits nothing, so it may
// run while another goroutine fills SQEs.
func (r *Ring) Wait(n uint32) error { return r.enter(0, n) }

func (r *Ring) enter(submit, wait uint32) error {
	for {
		flags := uintptr(0)
		if wait > 0 {
			flags = enterGetEvents
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), uintptr(wait), flags, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			if wait > 0 && r.Ready() > 0 {
				return nil
			}
			continue
		}
		return os.NewSyscallError("io_uring_enter", errno)
	}
}

// Ready is the number of completions waiting.
func (r *Ring) Ready() uint32 {
	return atomic.LoadUint32(r.cqTail) - *r.cqHead
}

// Reap hands each waiting completion to f and frees its slot.
func (r *Ring) Reap(f func(userData uint64, res int32)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := unsafe.Add(r.cqes, uintptr(head&r.cqMask)*uintptr(r.cqeSize))
		f(*(*uint64)(c), *(*int32)(unsafe.Add(c, 8)))
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// PutCmd fills a URING_CMD SQE: cmd_op on fd, with cmd in the SQE's
// command area (at most 16 octets, 80 with SetupSQE128).
func PutCmd(e []byte, fd int, op uint32, userData uint64, cmd []byte) {
	e[SQEOpcode] = OpURingCmd
	*(*int32)(unsafe.Pointer(&e[SQEFD])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&e[SQEOff])) = op
	*(*uint64)(unsafe.Pointer(&e[SQEUserData])) = userData
	copy(e[SQECmd:], cmd)
}

// PutCmdVec is PutCmd with an address and length in the SQE as well, as a
// command that takes an iovec array wants.
func PutCmdVec(e []byte, fd int, op uint32, userData uint64, addr unsafe.Pointer, n uint32, cmd []byte) {
	PutCmd(e, fd, op, userData, cmd)
	*(*uint64)(unsafe.Pointer(&e[SQEAddr])) = uint64(uintptr(addr))
	*(*uint32)(unsafe.Pointer(&e[SQELen])) = n
}

// PutPoll fills a one-shot POLL_ADD SQE for POLLIN on fd.
func PutPoll(e []byte, fd int, userData uint64) {
	e[SQEOpcode] = OpPollAdd
	*(*int32)(unsafe.Pointer(&e[SQEFD])) = int32(fd)
	*(*uint32)(unsafe.Pointer(&e[SQEOpFlags])) = unix.POLLIN
	*(*uint64)(unsafe.Pointer(&e[SQEUserData])) = userData
}

// PutRead fills a READ SQE: n octets from fd at off (^uint64(0): at the
// file's position, as a stream wants) into buf, which must stay put and
// alive until the read completes (memory outside the Go heap).
func PutRead(e []byte, fd int, buf unsafe.Pointer, n uint32, off uint64, userData uint64) {
	e[SQEOpcode] = OpRead
	*(*int32)(unsafe.Pointer(&e[SQEFD])) = int32(fd)
	*(*uint64)(unsafe.Pointer(&e[SQEOff])) = off
	*(*uint64)(unsafe.Pointer(&e[SQEAddr])) = uint64(uintptr(buf))
	*(*uint32)(unsafe.Pointer(&e[SQELen])) = n
	*(*uint64)(unsafe.Pointer(&e[SQEUserData])) = userData
}

// PutNop fills a NOP SQE, which completes at once with 0.
func PutNop(e []byte, userData uint64) {
	e[SQEOpcode] = OpNop
	*(*uint64)(unsafe.Pointer(&e[SQEUserData])) = userData
}
