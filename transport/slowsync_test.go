package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// stuckSync is a memory store whose Sync waits until release is closed, as
// a disk's flush can take long.
type stuckSync struct {
	*blockdev.Memory
	entered chan struct{}
	release chan struct{}
}

func (s *stuckSync) Sync(off, n int64) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Memory.Sync(off, n)
}

// TestSlowSyncDoesNotStallTheConnection: while a SYNCHRONIZE CACHE waits on
// the store, READs and WRITEs on the same connection complete; the sync
// then completes GOOD.
func TestSlowSyncDoesNotStallTheConnection(t *testing.T) {
	checkGoroutines(t)
	m, err := blockdev.NewMemory(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	st := &stuckSync{Memory: m, entered: make(chan struct{}, 4), release: make(chan struct{})}
	r := newRig(t, rigOpts{stores: []blockdev.Store{st}})
	s := r.dial(t, initiator.Config{TargetName: targetName})

	for _, cdb := range [][]byte{
		{0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0},                      // SYNCHRONIZE CACHE(10), whole LU
		{0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, // SYNCHRONIZE CACHE(16), 4096 blocks
	} {
		syncDone := make(chan *initiator.Command, 1)
		go func() {
			cmd := &initiator.Command{CDB: cdb}
			if err := s.Do(context.Background(), cmd); err != nil {
				t.Error(err)
			}
			syncDone <- cmd
		}()
		select { // the sync is inside the store now
		case <-st.entered:
		case c := <-syncDone:
			t.Fatalf("SYNCHRONIZE CACHE %#x ended without syncing the store: status %#x sense %x", cdb[0], c.Status, c.Sense)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		buf, _ := s.Alloc(64 << 10)
		for i := range 8 {
			w := &initiator.Command{CDB: write16(uint64(i*128), 128), Dir: initiator.DataOut, Data: buf}
			rd := &initiator.Command{CDB: read16(uint64(i*128), 128), Dir: initiator.DataIn, Data: buf}
			for _, c := range []*initiator.Command{w, rd} {
				if err := s.Do(ctx, c); err != nil || c.Status != 0 {
					t.Fatalf("CDB %x behind a stuck SYNCHRONIZE CACHE: %v, status %#x", c.CDB, err, c.Status)
				}
			}
		}
		cancel()
		s.Free(buf)
		select {
		case c := <-syncDone:
			t.Fatalf("SYNCHRONIZE CACHE %#x completed while the store's Sync was stuck: status %#x", cdb[0], c.Status)
		default:
		}
		st.release <- struct{}{}
		if c := <-syncDone; c.Status != 0 {
			t.Errorf("SYNCHRONIZE CACHE %#x: status %#x sense %x", cdb[0], c.Status, c.Sense)
		}
	}
}
