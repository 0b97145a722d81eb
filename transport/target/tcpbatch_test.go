package target_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/burst"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/target"
)

// TestTCPAnswersTogether: over iSCSI/TCP, the answers to commands that
// arrive together leave in a few writes (the loop's batch), not one each,
// and carry the right data; a command alone is answered at once.
func TestTCPAnswersTogether(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := newImmRig(t)
	s := r.dial(t, initiator.NetworkISCSITCP, yesImmIQN)
	st := r.stores[yesImmIQN]
	for i := range st.Mapping().Bytes()[:1<<20] {
		st.Mapping().Bytes()[i] = byte(i*7 + i>>12)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 16
	bufs := make([][]byte, n)
	for i := range bufs {
		var err error
		if bufs[i], err = s.Alloc(4096); err != nil {
			t.Fatal(err)
		}
	}
	read := func(i int) error {
		c := &initiator.Command{CDB: rw16(0x88, uint64(i*8), 8), Dir: initiator.DataIn, Data: bufs[i]}
		if err := s.Do(ctx, c); err != nil {
			return err
		}
		if c.Status != 0 || !bytes.Equal(bufs[i], st.Mapping().Bytes()[i*4096:(i+1)*4096]) {
			t.Errorf("READ %d: status %#x, data equal %v", i, c.Status, bytes.Equal(bufs[i], st.Mapping().Bytes()[i*4096:(i+1)*4096]))
		}
		return nil
	}
	// One at a time: an answer each, with nothing to wait for.
	for i := range n {
		if err := read(i); err != nil {
			t.Fatal(err)
		}
	}
	before := target.TCPWrites()
	for _, err := range burst.Run(n, read) {
		t.Fatal(err)
	}
	if w := target.TCPWrites() - before; w > n/4 {
		t.Fatalf("the answers to %d commands sent together took %d writes, want at most %d", n, w, n/4)
	}
}
