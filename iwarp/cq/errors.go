package cq

import "errors"

var (
	// ErrOverrun: the ring is full and the completion was not queued (a CQ
	// overrun; the engine moves the QP to the error state).
	ErrOverrun = errors.New("cq: completion queue overrun")
	// ErrClosed: the ring has been closed.
	ErrClosed = errors.New("cq: completion queue closed")
	// ErrCapacity: an invalid capacity for New.
	ErrCapacity = errors.New("cq: invalid capacity")
)
