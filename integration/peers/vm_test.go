package peers

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
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
// (TCG), hence the limits; with PEERS_LIBISCSI=all (libiscsi's whole
// suite) the limit is an hour. PEERS_GUEST_RUN, a -test.run pattern,
// runs only some guest tests (by hand; the others then need not pass).
func TestPeers(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	stage(t, dir)
	limit := 1200
	if os.Getenv("PEERS_LIBISCSI") == "all" {
		limit = 3600
	}
	run, wanted := "^TestGuest", guestTests
	if p := os.Getenv("PEERS_GUEST_RUN"); p != "" {
		re, err := regexp.Compile(p)
		if err != nil {
			t.Fatalf("PEERS_GUEST_RUN: %v", err)
		}
		run, wanted = p, nil
		for _, name := range guestTests {
			if re.MatchString(name) {
				wanted = append(wanted, name)
			}
		}
	}
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", strconv.Itoa(limit), "--", "./"+guestBinary, "-test.v",
		"-test.timeout", strconv.Itoa(limit-50)+"s", "-test.run", run)
	// The failures first: CI keeps the head and the tail of a long log.
	if err != nil {
		t.Errorf("guest tests: %v (exit 124 is run-vm.sh's %d s limit)", err, limit)
	}
	if f := vmlab.Failures(out); f != "" {
		t.Errorf("failed in the guest:\n%s", f)
	}
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out)
	for _, name := range wanted {
		if !regexp.MustCompile(`--- (PASS|SKIP): ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass in the guest", name)
		}
	}
	if bytes.Contains(out, []byte("--- FAIL")) {
		t.Error("a guest test failed")
	}
}
