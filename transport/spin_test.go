package transport_test

import (
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// TestAwaitedSpin: an initiator whose receiver spins only for awaited
// answers (iwarp.ConnConfig.ReadSpinAwaitedOnly, as the FUSE mount's)
// spins for the answer to each command sent at queue depth 1 (from the
// second in a row), reads and writes alike: the session awaits it
// (iwarp.QP.AwaitAnswer). The spin is
// long (10 s) so that every answer is caught by it on any machine. The
// rig's target does not spin, so the Device's count is the initiator's.
func TestAwaitedSpin(t *testing.T) {
	if rigNet != "tcp" {
		t.Skip("the receiver spins over MPA/TCP only")
	}
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName,
		Conn: iwarp.ConnConfig{ReadSpin: 10 * time.Second, ReadSpinAwaitedOnly: true}})
	buf, err := s.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free(buf)
	before := r.dev.Counters().SpinCaught
	const n = 20
	for i := range n {
		do(t, s, &initiator.Command{CDB: write16(uint64(i*8), 8), Dir: initiator.DataOut, Data: buf})
		do(t, s, &initiator.Command{CDB: read16(uint64(i*8), 8), Dir: initiator.DataIn, Data: buf})
	}
	// The first command alone is not awaited: only a second in a row
	// says that the caller waits on each.
	if got := r.dev.Counters().SpinCaught - before; got < 2*n-1 {
		t.Fatalf("%d answers of %d commands at queue depth 1 caught by the spin, want all but the first", got, 2*n)
	}
}
