//go:build cgo

package rbd

import (
	"bytes"
	"testing"

	"github.com/ddpstore/ddpstore/internal/cephtest"
)

// testNoCache: a write is in the cluster when WriteAt returns, even after
// a flush (which turns librbd's default cache from writethrough to
// writeback): a second client of the image, as a second gateway is, reads
// it at once.
func testNoCache(t *testing.T, c *cephtest.Cluster) {
	a, cfg := open(t, c, 8*mib)
	if err := a.Sync(0, a.Size()); err != nil {
		t.Fatal(err)
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 4 {
		w := make([]byte, 64<<10)
		pattern(w, int64(i)*mib, byte(i+1))
		if err := a.WriteAt(w, int64(i)*mib); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(w))
		if err := b.ReadAt(got, int64(i)*mib); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("write %d: another client of the image does not read what WriteAt wrote (a cache holds it)", i)
		}
	}
}
