package peers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// LIO, Linux's in-kernel target, with its iSER driver ib_isert, configured
// through configfs directly (no targetcli in the guest).
const (
	lioIQN   = "iqn.2003-01.org.linux-iscsi.vmlab:lio"
	lioPort  = "3261"
	lioLUN   = 0
	lioPages = 16384 // of 4 KiB: a 64 MiB RAM disk (rd_mcp)
)

const configfs = "/sys/kernel/config/target"

// startLIO exports a 64 MiB RAM disk as LUN 0 of lioIQN on an iSER portal
// at guestAddr:lioPort, open to every initiator without authentication,
// and returns the portal.
//
// A LIO network portal is made for iSCSI/TCP first; writing 1 to its iser
// attribute adds an iSER listener on the same address and port. With siw
// that listener is a kernel TCP socket too, and it cannot bind beside
// LIO's own (isert: rdma_listen() failed: -98). So the portal directory is
// made by a process in a network namespace of its own, where LIO's TCP
// listener then lives (it is created in the caller's namespace, on a
// loopback given guestAddr), and the iSER listener, made from the guest's
// namespace, is the only one on guestAddr:lioPort there.
func startLIO(t *testing.T) string {
	t.Helper()
	rd := filepath.Join(configfs, "core", "rd_mcp_0", "rd0")
	tpg := filepath.Join(configfs, "iscsi", lioIQN, "tpgt_1")
	lun := filepath.Join(tpg, "lun", "lun_0")
	np := filepath.Join(tpg, "np", guestAddr+":"+lioPort)
	t.Cleanup(func() {
		// Undone in reverse; each step logs when it fails, none is fatal
		// (the guest is thrown away).
		for _, step := range []func() error{
			func() error { return os.WriteFile(filepath.Join(tpg, "enable"), []byte("0"), 0) },
			func() error { return os.Remove(filepath.Join(lun, "rd0")) },
			func() error { return os.Remove(lun) },
			func() error { return os.Remove(np) },
			func() error { return os.Remove(tpg) },
			func() error { return os.Remove(filepath.Join(configfs, "iscsi", lioIQN)) },
			func() error { return os.Remove(rd) },
		} {
			if err := step(); err != nil {
				t.Logf("tearing LIO down: %v", err)
			}
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("configuring LIO: %v", err)
		}
	}
	write := func(path, value string) {
		t.Helper()
		must(os.WriteFile(path, []byte(value), 0))
	}
	must(os.MkdirAll(rd, 0o755))
	write(filepath.Join(rd, "control"), "rd_pages="+strconv.Itoa(lioPages))
	write(filepath.Join(rd, "enable"), "1")
	must(os.MkdirAll(lun, 0o755))
	must(os.Symlink(rd, filepath.Join(lun, "rd0")))
	script := "ip link set lo up && ip addr add " + guestAddr + "/32 dev lo && mkdir " + np
	if out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("making LIO's network portal in a namespace of its own: %v: %s", err, out)
	}
	write(filepath.Join(np, "iser"), "1")
	for k, v := range map[string]string{
		"generate_node_acls": "1", "cache_dynamic_acls": "1",
		"demo_mode_write_protect": "0", "authentication": "0",
	} {
		write(filepath.Join(tpg, "attrib", k), v)
	}
	write(filepath.Join(tpg, "enable"), "1")
	if b, err := os.ReadFile(filepath.Join(np, "iser")); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("LIO's portal has no iSER listener (iser reads %q, %v)", b, err)
	}
	return guestAddr + ":" + lioPort
}
