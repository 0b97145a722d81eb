package transport_test

import (
	"testing"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// TestInlineAnswers: at queue depth 1 each end's Loop is idle when a
// message comes, so the QP's receiver handles it on its own goroutine
// (iserconn's inline consumer): the target's command, the RDMA Read
// Response of a WRITE's data, the initiator's answer. The rig's target
// and initiator share one Device, whose count is both ends'.
func TestInlineAnswers(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	buf, err := s.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free(buf)
	// The first commands may find a Loop still busy with the login.
	do(t, s, &initiator.Command{CDB: read16(0, 8), Dir: initiator.DataIn, Data: buf[:4096]})
	before := r.dev.Counters().Inline
	const n = 20
	for i := range n {
		do(t, s, &initiator.Command{CDB: write16(uint64(i*128), 128), Dir: initiator.DataOut, Data: buf})
		do(t, s, &initiator.Command{CDB: read16(uint64(i*128), 128), Dir: initiator.DataIn, Data: buf})
	}
	// 2n commands, each handled inline at least at the target and at the
	// initiator; allow for a few that found a Loop busy (a timer's tick).
	if got := r.dev.Counters().Inline - before; got < 3*n {
		t.Fatalf("%d completions handled inline for %d commands at queue depth 1, want at least %d", got, 2*n, 3*n)
	}
}
