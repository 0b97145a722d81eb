package sctp

import (
	"context"
	"fmt"
	"net"
)

// Networks naming the two backends.
const (
	NetworkKernel = "sctp"     // kernel SCTP (linux)
	NetworkUDP    = "sctp-udp" // userspace SCTP over UDP (pion/sctp)
)

// IsNetwork reports whether network names a DDP/SCTP backend.
func IsNetwork(network string) bool { return network == NetworkKernel || network == NetworkUDP }

// Listener accepts associations.
type Listener interface {
	Accept(ctx context.Context) (*Association, error)
	Close() error
	Addr() net.Addr
}

// Dial sets up an association with addr over the backend network names.
func Dial(ctx context.Context, network, addr string, cfg Config) (*Association, error) {
	switch network {
	case NetworkUDP:
		return DialUDP(ctx, addr, cfg)
	case NetworkKernel:
		return DialKernel(ctx, addr, cfg)
	}
	return nil, fmt.Errorf("sctp: unknown network %q", network)
}

// Listen listens for associations on addr over the backend network names.
func Listen(network, addr string, cfg Config) (Listener, error) {
	switch network {
	case NetworkUDP:
		return ListenUDP(addr, cfg)
	case NetworkKernel:
		return ListenKernel(addr, cfg)
	}
	return nil, fmt.Errorf("sctp: unknown network %q", network)
}

// MaxSessionPrivateData returns the Private Data a Session Control message
// takes from its ULP over the backend network names (see aliParam).
func MaxSessionPrivateData(network string) int {
	if network == NetworkUDP {
		return MaxPrivateData - len(aliParam)
	}
	return MaxPrivateData
}

// acceptFrom returns the next association queued on assoc, ErrClosed once
// done is closed, or ctx's error: the Accept of every listener.
func acceptFrom(ctx context.Context, assoc <-chan *Association, done <-chan struct{}) (*Association, error) {
	select {
	case a := <-assoc:
		return a, nil
	case <-done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// abortQueued aborts the associations a closed listener set up but nobody
// accepted.
func abortQueued(assoc <-chan *Association) {
	for {
		select {
		case a := <-assoc:
			a.Abort()
		default:
			return
		}
	}
}
