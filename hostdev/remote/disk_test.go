package remote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

const slotSize = 256<<10 + 2*4096

// open serves stores as LUNs and opens LUN 0 of a new session as a Disk.
func open(t *testing.T, nslots int, stores ...blockdev.Store) (*remote.Disk, *initiator.Session) {
	t.Helper()
	testtarget.CheckLeaks(t)
	tt := testtarget.Start(t, stores...)
	s := tt.Dial(t, initiator.Config{Buffers: 16 << 20, QueueDepth: 32})
	slots, err := remote.NewSlots(s, nslots, slotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slots.Close)
	d, err := remote.Open(context.Background(), s, 0, slots)
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

func TestReadWriteAnyOffset(t *testing.T) {
	st := testtarget.Memory(t, 4<<20)
	d, _ := open(t, 4, st)
	if d.Size() != 4<<20 || d.BlockSize() != 512 || d.ReadOnly() {
		t.Fatalf("size %d, block size %d, read-only %v", d.Size(), d.BlockSize(), d.ReadOnly())
	}
	shadow := make([]byte, d.Size())
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		off  int64
		n    int
	}{
		{"aligned block", 0, 512},
		{"aligned run", 4096, 64 << 10},
		{"one byte", 7, 1},
		{"inside one block", 1000, 20},
		{"head partial", 513, 1023},
		{"tail partial", 2048, 700},
		{"both partial", 100, 5000},
		{"largest unaligned", 3, d.MaxIO()},
		{"last byte", d.Size() - 1, 1},
		{"ends at the end", d.Size() - 777, 777},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := make([]byte, c.n)
			for i := range p {
				p[i] = byte(r.Uint32())
			}
			if n, err := d.WriteAt(p, c.off); err != nil || n != c.n {
				t.Fatalf("WriteAt(%d, %d) = %d, %v", c.n, c.off, n, err)
			}
			copy(shadow[c.off:], p)
			if !bytes.Equal(st.Mapping().Bytes(), shadow) {
				t.Fatal("the store differs from what was written (neighbouring bytes changed?)")
			}
			// Read back a range wider than the write, unaligned.
			a := max(0, c.off-3)
			b := min(d.Size(), c.off+int64(c.n)+5, a+int64(d.MaxIO()))
			sl, err := d.Read(context.Background(), a, int(b-a))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sl.Bytes(), shadow[a:b]) {
				t.Error("read back differs from what was written")
			}
			sl.Release()
		})
	}
}

func TestEdges(t *testing.T) {
	d, _ := open(t, 2, testtarget.Memory(t, 1<<20))
	ctx := context.Background()
	sl, err := d.Read(ctx, d.Size()-10, 100)
	if err != nil || len(sl.Bytes()) != 10 {
		t.Fatalf("read across the end: %v", err)
	}
	sl.Release()
	if _, err := d.Read(ctx, d.Size(), 1); !errors.Is(err, io.EOF) {
		t.Errorf("read at the end: %v, want EOF", err)
	}
	if _, err := d.Write(ctx, d.Size()-1, []byte{1, 2}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write across the end: %v, want ENOSPC", err)
	}
	if _, err := d.Read(ctx, -1, 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("negative offset: %v, want EINVAL", err)
	}
	if _, err := d.Read(ctx, 0, d.MaxIO()+1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("read longer than MaxIO: %v, want EINVAL", err)
	}
	if n, err := d.Write(ctx, 0); n != 0 || err != nil {
		t.Errorf("empty write: %d, %v", n, err)
	}
	if err := d.Sync(ctx); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if _, err := d.ReadAt(make([]byte, 20), d.Size()-10); err != io.EOF {
		t.Errorf("ReadAt across the end: %v, want io.EOF", err)
	}
}

// TestPartialBlockWritesKeepEachOther: writers patching different bytes of
// the same blocks at once must not undo each other (read-modify-write).
func TestPartialBlockWritesKeepEachOther(t *testing.T) {
	st := testtarget.Memory(t, 1<<20)
	d, _ := open(t, 8, st)
	const writers, rounds = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				// byte w+8*i of block 0 and one aligned block 1 write
				off := int64(w + writers*i)
				if _, err := d.Write(context.Background(), off, []byte{byte(w + 1)}); err != nil {
					t.Error(err)
					return
				}
				if _, err := d.Write(context.Background(), 512, bytes.Repeat([]byte{byte(w)}, 512)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b := st.Mapping().Bytes()
	for i := range writers * rounds {
		if b[i] != byte(i%writers+1) {
			t.Fatalf("byte %d is %d, want %d: a write was lost", i, b[i], i%writers+1)
		}
	}
}

func TestReadOnlyLUN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.img")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xab}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := blockdev.OpenFile(path, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d, _ := open(t, 2, st)
	if !d.ReadOnly() {
		t.Fatal("a read-only LUN is not reported read-only (MODE SENSE WP)")
	}
	if _, err := d.Write(context.Background(), 0, make([]byte, 512)); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write to a read-only LUN: %v, want EROFS", err)
	}
	p := make([]byte, 100)
	if _, err := d.ReadAt(p, 5); err != nil || p[99] != 0xab {
		t.Errorf("read of a read-only LUN: %v", err)
	}
}

// TestSlotsBoundInFlight: with every slot taken, the next I/O waits, and
// gives up when its context ends.
func TestSlotsBoundInFlight(t *testing.T) {
	d, _ := open(t, 1, testtarget.Memory(t, 1<<20))
	sl, err := d.Read(context.Background(), 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Read(ctx, 0, 512); !errors.Is(err, context.Canceled) {
		t.Errorf("read with no free slot and a cancelled context: %v", err)
	}
	sl.Release()
	if _, err := d.Write(context.Background(), 0, make([]byte, 512)); err != nil {
		t.Errorf("write with a free slot: %v", err)
	}
}

// TestDiskAllocatesNothing: the aligned data path of a Disk allocates
// nothing per I/O beyond what the session does (which is nothing).
func TestDiskAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	d, _ := open(t, 2, testtarget.Memory(t, 1<<20))
	ctx := context.Background()
	p := make([]byte, 4096)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := d.Write(ctx, 8192, p); err != nil {
			t.Fatal(err)
		}
		sl, err := d.Read(ctx, 8192, 4096)
		if err != nil {
			t.Fatal(err)
		}
		sl.Release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per 4 KiB write + read, want 0", allocs)
	}
}
