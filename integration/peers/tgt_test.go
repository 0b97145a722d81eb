package peers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/tgtpeer"
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
	// guest has 1 GiB in all. tgtd raises a pool_sz_mb below 128 to 128.
	tgtPoolMiB = "128"
	// Each command's data must fit one buffer of the pool (512 KiB
	// unless told, buf_sz_kb): a larger write is refused ("rdma-rd
	// size:1048576 too big") and the connection closed. ddpinitiator
	// mount writes up to 1 MiB at once.
	tgtBufKiB  = "1024"
	tgtControl = "3265"
	// libiscsiInq is the initiator name of iscsi-inq, the control.
	libiscsiInq = "iqn.2026-11.io.ddpstore:libiscsi-inq"
)

// startTgtd starts tgtd in the foreground with its iSER driver, makes
// tgtIQN with a 64 MiB file as tgtLUN, open to every initiator, and
// returns the iSER portal. tgtd's log goes into the test's log at the end.
func startTgtd(t *testing.T) string {
	t.Helper()
	os.MkdirAll("/var/run/tgtd", 0o755)
	img := filepath.Join(t.TempDir(), "tgt.img")
	if err := tgtpeer.NewImage(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var log vmlab.SyncBuffer
	cmd := prog(ctx, "tgtd", "--foreground", "--control-port", tgtControl,
		"--iscsi", "portal="+tgtTCPPortal, "--iser", "pool_sz_mb="+tgtPoolMiB+",buf_sz_kb="+tgtBufKiB)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tgtd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	adm := func(args ...string) (string, error) {
		return runProg(t, 30*time.Second, "tgtadm", append([]string{"-C", tgtControl}, args...)...)
	}
	t.Cleanup(func() {
		tgtpeer.Stop(adm, "iser", 1, done, cancel)
		cancel()
		t.Logf("tgtd's log:\n%s", log.String())
	})
	// tgt 1.0.85's iSER login (iser_login_start) refuses an initiator
	// unless both an address ACL and an initiator-name ACL admit it, with
	// Target not found (0203h), where its iSCSI/TCP login needs either
	// (fixed upstream in 1.0.95, "Fix IP and initiator ACL testing logic
	// to allow undefined initiator name ACL"): the names of the
	// initiators the tests run are bound too.
	err := tgtpeer.Create(adm, tgtpeer.Target{LLD: "iser", TID: 1, IQN: tgtIQN, LUN: tgtLUN, File: img,
		Initiators: []string{initiatorIQN, libiscsiInq}}, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\ntgtd: %s", err, log.String())
	}
	return guestAddr + ":" + tgtPort
}
