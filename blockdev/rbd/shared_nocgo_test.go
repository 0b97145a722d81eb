//go:build !cgo

package rbd

import (
	"errors"
	"testing"
)

// TestSharedNoCgo: without cgo OpenShared says why it cannot reach the
// cluster.
func TestSharedNoCgo(t *testing.T) {
	s, err := OpenShared(Config{Pool: "rbd"}, "ddpstore.pr.disk1")
	want := "rbd: open shared object rbd/ddpstore.pr.disk1: built without cgo (CGO_ENABLED=0): no librbd to reach Ceph with"
	if s != nil || !errors.Is(err, ErrNoCgo) || err.Error() != want {
		t.Errorf("OpenShared: %v, %v; want %q", s, err, want)
	}
}
