package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// TestReconnectBackoffRestarts: losses that come well apart each
// reconnect at once. The back-off (50 ms doubling to 2 s) is for one
// outage; it used to carry over to the next, so that from the sixth loss
// on every reconnect of a long-lived session waited 2 s (the soak saw
// every cut stall a mount for 2 s).
func TestReconnectBackoffRestarts(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	px := newCutProxy(t, r.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, "tcp", px.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, RecoveryTimeout: 20 * time.Second, Log: quietLog(), Buffers: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 6; i++ {
		time.Sleep(2100 * time.Millisecond) // longer than the longest back-off
		px.cut()
		t0 := time.Now()
		if err := pattern(s, 0, 4096, int64(i)); err != nil {
			t.Fatalf("loss %d: %v", i, err)
		}
		if took := time.Since(t0); took > time.Second {
			t.Fatalf("loss %d: the first I/O after it took %v; the back-off of earlier losses carried over", i, took.Round(time.Millisecond))
		}
	}
}
