package initiator_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/burst"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// TestTCPCommandsPostedTogether: commands posted together over iSCSI/TCP
// go out in a few writes, not one each (the sender goroutine's batch),
// while a command alone goes out at once; and the data of every one is
// right.
func TestTCPCommandsPostedTogether(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	target := tcpTarget(t)
	cfg := quietConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, nil, initiator.NetworkISCSITCP, target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const n = 16
	bufs := make([][]byte, n)
	for i := range bufs {
		if bufs[i], err = s.Alloc(4096); err != nil {
			t.Fatal(err)
		}
	}
	cdb := func(op byte, lba int) []byte {
		return []byte{op, 0, 0, 0, 0, 0, 0, 0, byte(lba >> 8), byte(lba), 0, 0, 0, 8, 0, 0}
	}
	// Commands one at a time: each goes out alone, at once.
	before := initiator.TCPWrites(s)
	for i := range n {
		for j := range bufs[i] {
			bufs[i][j] = byte(i*31 + j)
		}
		w := &initiator.Command{CDB: cdb(0x8a, i*8), Dir: initiator.DataOut, Data: bufs[i]}
		if err := s.Do(ctx, w); err != nil || w.Status != 0 {
			t.Fatalf("WRITE %d: %v, status %#x", i, err, w.Status)
		}
	}
	if w := initiator.TCPWrites(s) - before; w != n {
		t.Fatalf("%d commands one at a time went out in %d writes, want one each", n, w)
	}

	// Readied together: a few writes.
	before = initiator.TCPWrites(s)
	got := make([][]byte, n)
	for i := range got {
		if got[i], err = s.Alloc(4096); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range burst.Run(n, func(i int) error {
		r := &initiator.Command{CDB: cdb(0x88, i*8), Dir: initiator.DataIn, Data: got[i]}
		if err := s.Do(ctx, r); err != nil || r.Status != 0 {
			return fmt.Errorf("READ %d: %v, status %#x", i, err, r.Status)
		}
		if !bytes.Equal(got[i], bufs[i]) {
			return fmt.Errorf("READ %d: not what was written", i)
		}
		return nil
	}) {
		t.Fatal(err)
	}
	if w := initiator.TCPWrites(s) - before; w > n/4 {
		t.Fatalf("%d commands posted together went out in %d writes, want at most %d", n, w, n/4)
	}
}
