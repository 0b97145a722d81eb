//go:build !cgo

package rbd

import "time"

// sharedConn without cgo: there is no librados, so OpenShared fails.
type sharedConn struct{}

func (sharedConn) open(Config) error                            { return ErrNoCgo }
func (sharedConn) close()                                       {}
func (sharedConn) load(string) ([]byte, uint64, error)          { return nil, 0, ErrNoCgo }
func (sharedConn) store(string, []byte, uint64) (uint64, error) { return 0, ErrNoCgo }
func (sharedConn) create(string) error                          { return ErrNoCgo }
func (sharedConn) watch(*Shared, string, time.Duration) (uint64, error) {
	return 0, ErrNoCgo
}
func (sharedConn) unwatch(uint64) error             { return ErrNoCgo }
func (sharedConn) flush() error                     { return ErrNoCgo }
func (sharedConn) ack(string, uint64, uint64) error { return ErrNoCgo }
func (sharedConn) notify(string, []byte, time.Duration) (int, int, error) {
	return 0, 0, ErrNoCgo
}
