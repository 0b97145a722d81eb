package peers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// Debian's tgtd with its iSER driver.
const (
	tgtIQN = "iqn.2026-11.io.ddpstore:tgt"
	tgtLUN = 1 // tgt's LUN 0 is its controller (docs/interop.md, "tgt over TCP")
	// tgtd's iSER listener is on port 3260 of every address: tgt 1.0.85
	// parses --iser port=N with a stale errno and refuses it ("invalid port
	// supplied"), so the default stays.
	tgtPort = "3260"
	// Its iSCSI/TCP listener is put where it cannot take the port from
	// the iSER one (with siw both are kernel TCP sockets).
	tgtTCPPortal = "127.0.0.1:3264"
	// tgtd's iSER buffer pool is 1 GiB unless told (pool_sz_mb); the
	// guest has 1 GiB in all.
	tgtPoolMiB = "64"
	tgtControl = "3265"
)

// startTgtd starts tgtd in the foreground with its iSER driver, makes
// tgtIQN with a 64 MiB file as tgtLUN, open to every initiator, and
// returns the iSER portal. tgtd's log goes into the test's log at the end.
func startTgtd(t *testing.T) string {
	t.Helper()
	os.MkdirAll("/var/run/tgtd", 0o755)
	img := filepath.Join(t.TempDir(), "tgt.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var log vmlab.SyncBuffer
	cmd := prog(ctx, "tgtd", "--foreground", "--control-port", tgtControl,
		"--iscsi", "portal="+tgtTCPPortal, "--iser", "pool_sz_mb="+tgtPoolMiB)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tgtd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		adm(t, "--lld", "iser", "--op", "delete", "--force", "--mode", "target", "--tid", "1")
		adm(t, "--op", "delete", "--mode", "system")
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
		t.Logf("tgtd's log:\n%s", log.String())
	})
	// tgtd takes its control socket a moment after it starts.
	var out string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err = adm(t, "--lld", "iser", "--op", "new", "--mode", "target", "--tid", "1", "-T", tgtIQN)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("tgtadm: new target: %v: %s\ntgtd: %s", err, out, log.String())
	}
	for _, args := range [][]string{
		{"--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1", "-b", img},
		{"--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"},
	} {
		if out, err := adm(t, append([]string{"--lld", "iser"}, args...)...); err != nil {
			t.Fatalf("tgtadm %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return guestAddr + ":" + tgtPort
}

func adm(t *testing.T, args ...string) (string, error) {
	return runProg(t, 30*time.Second, "tgtadm", append([]string{"-C", tgtControl}, args...)...)
}
