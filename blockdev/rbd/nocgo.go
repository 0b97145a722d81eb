//go:build !cgo

package rbd

// conn without cgo: there is no librbd, so no image can be opened.
type conn struct{}

func (conn) open(Config) (int64, error)        { return 0, ErrNoCgo }
func (conn) do(op, []byte, int64, int64) error { return ErrNoCgo }
func (conn) close() error                      { return ErrNoCgo }
