//go:build !cgo

package rbd

import (
	"errors"
	"testing"
)

// TestNoCgo: without cgo the package builds, and Open says why it cannot
// open anything.
func TestNoCgo(t *testing.T) {
	im, err := Open(Config{Pool: "rbd", Image: "disk1"})
	want := "rbd: open rbd/disk1: built without cgo (CGO_ENABLED=0): no librbd to reach Ceph with"
	if im != nil || !errors.Is(err, ErrNoCgo) || err.Error() != want {
		t.Errorf("Open: %v, %v; want %q", im, err, want)
	}
}
