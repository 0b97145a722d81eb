package peers

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// guestTests are the tests the guest runs in its one boot; each must pass
// there (or skip, saying why, which the guest output shows).
var guestTests = []string{"TestGuestInitiatorLIO", "TestGuestInitiatorTgt", "TestGuestLibiscsi"}

// TestPeers boots the vmlab guest once (building it first when it is
// missing) and runs the guest tests of this package inside it. The guest
// part takes about 150 s on a quiet host and over 600 s on a busy one
// (TCG), hence the limits.
func TestPeers(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	stage(t, dir)
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "1200", "--", "./"+guestBinary, "-test.v", "-test.timeout", "1150s", "-test.run", "^TestGuest")
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Errorf("guest tests: %v (exit 124 is run-vm.sh's 1200 s limit)", err)
	}
	for _, name := range guestTests {
		if !regexp.MustCompile(`--- (PASS|SKIP): ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass in the guest", name)
		}
	}
	if bytes.Contains(out, []byte("--- FAIL")) {
		t.Error("a guest test failed")
	}
}
