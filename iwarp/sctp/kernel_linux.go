//go:build linux

package sctp

import (
	"context"
	"errors"
)

// ErrNoKernelSCTP: the kernel has no SCTP (no sctp module).
var ErrNoKernelSCTP = errors.New("sctp: this kernel has no SCTP")

// DialKernel sets up an association with kernel SCTP.
func DialKernel(ctx context.Context, addr string, cfg Config) (*Association, error) {
	return nil, ErrNoKernelSCTP
}

// ListenKernel listens with kernel SCTP.
func ListenKernel(addr string, cfg Config) (Listener, error) { return nil, ErrNoKernelSCTP }
