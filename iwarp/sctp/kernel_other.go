//go:build !linux

package sctp

import (
	"context"
	"errors"
)

// ErrNoKernelSCTP: kernel SCTP is only supported on linux.
var ErrNoKernelSCTP = errors.New("sctp: kernel SCTP needs linux")

// DialKernel is not available on this system.
func DialKernel(ctx context.Context, addr string, cfg Config) (*Association, error) {
	return nil, ErrNoKernelSCTP
}

// ListenKernel is not available on this system.
func ListenKernel(addr string, cfg Config) (Listener, error) { return nil, ErrNoKernelSCTP }

// KernelAvailable reports whether kernel SCTP can be used: never here.
func KernelAvailable() bool { return false }
