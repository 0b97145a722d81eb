package lunfs

import (
	"bytes"
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReadReplyIsThePlacedBuffer: the slices a read's reply is written
// from are the registered slot the target placed the data in, not a copy,
// and the slot goes back when go-fuse is done with the reply.
func TestReadReplyIsThePlacedBuffer(t *testing.T) {
	st := testtarget.Memory(t, 1<<20)
	copy(st.Mapping().Bytes()[4096:], "placed by the target")
	s := testtarget.Start(t, st).Dial(t, initiator.Config{Buffers: 4 << 20})
	slots, err := remote.NewSlots(s, 1, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer slots.Close()
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	fs := New([]*remote.Disk{d}, slots.Len(), Options{DirectIO: true})
	in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: rootIno + 1}, Offset: 4096, Size: 20}
	rr, st2 := fs.Read(nil, in, nil)
	if !st2.Ok() {
		t.Fatal(st2)
	}
	ws, ok := rr.(interface {
		Slices() ([][]byte, fuse.Status)
	})
	if !ok {
		t.Fatal("the read result does not take go-fuse's vectored reply path")
	}
	iov, _ := ws.Slices()
	if len(iov) != 1 || !bytes.Equal(iov[0], []byte("placed by the target")) {
		t.Fatalf("reply %q", iov)
	}
	if !slots.Holds(iov[0]) {
		t.Error("the reply is not in a registered slot: it was copied")
	}
	if b, _ := rr.Bytes(make([]byte, 64)); unsafe.SliceData(b) != unsafe.SliceData(iov[0]) {
		t.Error("Bytes copies instead of returning the slot")
	}
	rr.Done()
	// The one slot is free again: another read gets it (it would wait
	// for the deadline otherwise).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sl, err := d.Read(ctx, 0, 512)
	if err != nil {
		t.Fatalf("after Done the slot is still taken: %v", err)
	}
	sl.Release()
}
