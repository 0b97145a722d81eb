package rbd

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Config names an image and how to reach its cluster.
type Config struct {
	Pool  string // the pool holding the image
	Image string // the image's name
	// Conf is the ceph.conf to read (monitor addresses, and the keyring
	// unless Keyring is given); empty, librados looks where it always does
	// ($CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf).
	Conf string
	// User is the cephx client name without "client."; empty means "admin".
	User string
	// Keyring, when given, is the keyring file holding User's key, in place
	// of the one Conf names.
	Keyring string
	// ReadOnly opens the image read-only: writes, discards and
	// write-zeroes are refused without reaching the cluster.
	ReadOnly bool
}

// ErrNoCgo is what Open returns in a binary built without cgo.
var ErrNoCgo = errors.New("built without cgo (CGO_ENABLED=0): no librbd to reach Ceph with")

// Image is an open RBD image. Its methods may be called from many
// goroutines at once, but not after Close.
type Image struct {
	cfg  Config
	size int64

	// mu is held shared by every request for its whole life, and
	// exclusively by Close, which so waits for the requests in flight.
	mu     sync.RWMutex
	closed bool
	c      conn // librbd's handles, or nothing without cgo
}

// Open connects to the cluster cfg.Conf describes as client.cfg.User and
// opens the image cfg.Pool/cfg.Image. Its error is one line naming the
// pool, the image and what failed, wrapping the errno (errors.Is(err,
// syscall.ENOENT) for a missing pool or image).
func Open(cfg Config) (*Image, error) {
	if cfg.User == "" {
		cfg.User = "admin"
	}
	if cfg.Pool == "" || cfg.Image == "" {
		return nil, fmt.Errorf("rbd: open %s/%s: both a pool and an image must be named", cfg.Pool, cfg.Image)
	}
	im := &Image{cfg: cfg}
	size, err := im.c.open(cfg)
	if err != nil {
		return nil, fmt.Errorf("rbd: open %s: %w", im.name(), err)
	}
	im.size = size
	return im, nil
}

// Size is the image's size in octets, as it was at Open.
func (im *Image) Size() int64 { return im.size }

// ReadOnly reports whether the image was opened read-only.
func (im *Image) ReadOnly() bool { return im.cfg.ReadOnly }

// Thin reports whether Discard gives space back: RBD images are thin, a
// discarded object is deleted; false for a read-only image.
func (im *Image) Thin() bool { return !im.cfg.ReadOnly }

// ReadAt reads len(p) octets at off into p, which must lie inside the
// image.
func (im *Image) ReadAt(p []byte, off int64) error {
	return im.request(opRead, p, off, int64(len(p)))
}

// WriteAt writes p at off, which must lie inside the image. It is seen by
// later reads when it returns; Sync makes it durable.
func (im *Image) WriteAt(p []byte, off int64) error {
	return im.request(opWrite, p, off, int64(len(p)))
}

// Sync makes every write that returned before it durable. librbd flushes
// a whole image, so the range only has to lie inside it.
func (im *Image) Sync(off, n int64) error {
	return im.request(opFlush, nil, off, n)
}

// Discard deallocates [off, off+n): later reads of it return zeros. It is
// WriteZeroes: see the package's documentation.
func (im *Image) Discard(off, n int64) error {
	return im.request(opDiscard, nil, off, n)
}

// WriteZeroes makes [off, off+n) read as zeros, deallocating the objects
// wholly inside it.
func (im *Image) WriteZeroes(off, n int64) error {
	return im.request(opZeroes, nil, off, n)
}

// Close waits for the requests in flight, closes the image (flushing what
// librbd's cache holds) and disconnects from the cluster.
func (im *Image) Close() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return fmt.Errorf("rbd: close %s: %w", im.name(), os.ErrClosed)
	}
	im.closed = true
	if err := im.c.close(); err != nil {
		return fmt.Errorf("rbd: close %s: %w", im.name(), err)
	}
	return nil
}

type op int

// The requests, numbered as the C side's switch has them.
const (
	opRead op = iota
	opWrite
	opFlush
	opDiscard
	opZeroes
)

var opNames = [...]string{"read", "write", "flush", "discard", "write zeroes"}

// request checks a request and has librbd carry it out.
func (im *Image) request(o op, p []byte, off, n int64) error {
	if off < 0 || n < 0 || off+n < off || off+n > im.size {
		return fmt.Errorf("rbd: %s %s [%d, +%d): outside the image's %d octets", opNames[o], im.name(), off, n, im.size)
	}
	if o != opRead && o != opFlush && im.cfg.ReadOnly {
		return fmt.Errorf("rbd: %s %s: %w (opened read-only)", opNames[o], im.name(), syscall.EROFS)
	}
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.closed {
		return fmt.Errorf("rbd: %s %s: %w", opNames[o], im.name(), os.ErrClosed)
	}
	if n == 0 && o != opFlush {
		return nil
	}
	if err := im.c.do(o, p, off, n); err != nil {
		return fmt.Errorf("rbd: %s %s [%d, +%d): %w", opNames[o], im.name(), off, n, err)
	}
	return nil
}

func (im *Image) name() string { return im.cfg.Pool + "/" + im.cfg.Image }
