package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitiatorCommands runs discover, login and bench as processes
// against a ddptarget process, and checks their exit codes.
func TestInitiatorCommands(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	cfg := writeConfig(t, dir, fmt.Sprintf(`
portals:
  - listen: %s
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    luns:
      - {id: 0, memory: 64MiB}
      - {id: 3, path: %s, size: 8MiB}
`, addr, filepath.Join(dir, "lun3.img")))
	startTarget(t, cfg, addr)
	ini := ddpinitiator(t)
	cmd := func(args ...string) (string, int) {
		c := exec.Command(ini, args...)
		out, _ := c.CombinedOutput()
		return string(out), c.ProcessState.ExitCode()
	}
	out, code := cmd("discover", addr)
	if code != 0 || !strings.Contains(out, "iqn.2026-11.io.ddpstore:disk1") || !strings.Contains(out, addr) {
		t.Fatalf("discover: exit %d\n%s", code, out)
	}
	out, code = cmd("login", "--target", "iqn.2026-11.io.ddpstore:disk1", addr)
	if code != 0 || !strings.Contains(out, "LUN 0: 131072 blocks") || !strings.Contains(out, "LUN 3: 16384 blocks") {
		t.Fatalf("login: exit %d\n%s", code, out)
	}
	out, code = cmd("bench", "--target", "iqn.2026-11.io.ddpstore:disk1", "--lun", "3", "--rw", "randrw", "--verify",
		"--runtime", "1s", "--iodepth", "8", "--json", addr)
	var res struct {
		IOs          int64   `json:"ios"`
		IOPS         float64 `json:"iops"`
		Verified     bool    `json:"verified"`
		VerifyErrors int64   `json:"verify_errors"`
		P99          float64 `json:"lat_p99_us"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.IOs == 0 || !res.Verified || res.VerifyErrors != 0 || res.P99 <= 0 {
		t.Fatalf("bench: exit %d, %+v\n%s", code, res, out)
	}
	// A configuration file names the target, its portal and the
	// initiator: no PORTAL argument needed.
	icfg := filepath.Join(dir, "initiator.yaml")
	os.WriteFile(icfg, []byte(fmt.Sprintf("initiator_name: %s\ntargets:\n  - name: iqn.2026-11.io.ddpstore:disk1\n    portals: [%s]\n", initiatorName, addr)), 0o644)
	if out, code := cmd("login", "--config", icfg); code != 0 || !strings.Contains(out, "LUN 3") {
		t.Fatalf("login --config: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"login", "--target", "iqn.2026-11.io.ddpstore:nope", addr}, 1},
		{[]string{"discover", "127.0.0.1:1"}, 1},
		{[]string{"bench", "--rw", "sideways", addr}, 2},
		{[]string{"bench", "--bs", "1000", addr}, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"discover", addr, addr}, 2},
		{[]string{"login", "--queue-depth", "0", addr}, 2},
		{[]string{"login", "--config", filepath.Join(dir, "missing.yaml")}, 2},
		{[]string{"--help"}, 0},
		{[]string{"bench", "--help"}, 0},
	} {
		if out, code := cmd(c.args...); code != c.code {
			t.Errorf("ddpinitiator %v: exit %d, want %d\n%s", c.args, code, c.code, out)
		}
	}
}

// TestSCTPUDPPortal: ddptarget serves a portal over DDP on userspace SCTP
// over UDP; ddpinitiator reaches it by --transport and by its
// configuration's transport, and verified I/O runs over it.
func TestSCTPUDPPortal(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t) // a free TCP port; the UDP one beside it is very likely free too
	cfg := writeConfig(t, dir, fmt.Sprintf(`
portals:
  - listen: %s
  - listen: %s
    transport: sctp-udp
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    luns:
      - {id: 0, memory: 16MiB}
`, addr, addr))
	startTarget(t, cfg, addr)
	ini := ddpinitiator(t)
	if out, code := run(ini, "login", "--transport", "sctp-udp", "--target", "iqn.2026-11.io.ddpstore:disk1", addr); code != 0 || !strings.Contains(out, "LUN 0: 32768 blocks") {
		t.Fatalf("login over sctp-udp: exit %d\n%s", code, out)
	}
	icfg := filepath.Join(dir, "initiator.yaml")
	os.WriteFile(icfg, []byte(fmt.Sprintf("initiator_name: %s\ntargets:\n  - name: iqn.2026-11.io.ddpstore:disk1\n    portals: [%s]\n    transport: sctp-udp\n", initiatorName, addr)), 0o644)
	out, code := run(ini, "bench", "--config", icfg, "--rw", "randrw", "--verify", "--runtime", "1s", "--iodepth", "4", "--json")
	if code != 0 || !strings.Contains(out, `"verify_errors": 0`) {
		t.Fatalf("bench over sctp-udp from the configuration: exit %d\n%s", code, out)
	}
	if out, code := run(ini, "login", "--transport", "carrier-pigeon", addr); code != 2 {
		t.Errorf("--transport carrier-pigeon: exit %d\n%s", code, out)
	}
}

// TestISCSITCPPortal: ddptarget serves one LU on an iSER portal and an
// iscsi-tcp portal side by side; ddpinitiator runs verified I/O over
// iSCSI/TCP (by flag, and by its configuration's transport) and over iSER
// on the same LU, and libiscsi (a TCP-only initiator) logs in to it.
func TestISCSITCPPortal(t *testing.T) {
	dir := t.TempDir()
	addr, tcpAddr := freePort(t), freePort(t)
	cfg := writeConfig(t, dir, fmt.Sprintf(`
portals:
  - listen: %s
  - listen: %s
    transport: iscsi-tcp
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    luns:
      - {id: 0, memory: 16MiB}
`, addr, tcpAddr))
	startTarget(t, cfg, addr)
	ini := ddpinitiator(t)
	out, code := run(ini, "bench", "--transport", "iscsi-tcp", "--target", "iqn.2026-11.io.ddpstore:disk1", "--rw", "randrw",
		"--bs", "64KiB", "--verify", "--runtime", "1s", "--iodepth", "8", "--json", tcpAddr)
	if code != 0 || !strings.Contains(out, `"verify_errors": 0`) {
		t.Fatalf("bench over iscsi-tcp: exit %d\n%s", code, out)
	}
	icfg := filepath.Join(dir, "initiator.yaml")
	os.WriteFile(icfg, []byte(fmt.Sprintf("initiator_name: %s\ntargets:\n  - name: iqn.2026-11.io.ddpstore:disk1\n    portals: [%s]\n    transport: iscsi-tcp\n    header_digest: crc32c\n    data_digest: crc32c\n", initiatorName, tcpAddr)), 0o644)
	if out, code := run(ini, "bench", "--config", icfg, "--rw", "randrw", "--verify", "--runtime", "1s", "--iodepth", "4", "--json"); code != 0 || !strings.Contains(out, `"verify_errors": 0`) {
		t.Fatalf("bench over iscsi-tcp from the configuration: exit %d\n%s", code, out)
	}
	if out, code := run(ini, "bench", "--target", "iqn.2026-11.io.ddpstore:disk1", "--rw", "randrw", "--verify", "--runtime", "1s", "--iodepth", "4", "--json", addr); code != 0 || !strings.Contains(out, `"verify_errors": 0`) {
		t.Fatalf("bench over iSER beside it: exit %d\n%s", code, out)
	}
	if msg, err := exec.Command("../../scripts/conformance.sh").CombinedOutput(); err != nil {
		t.Logf("libiscsi not available, its login skipped: %s", msg)
		return
	}
	out2, err := exec.Command("iscsi-inq", "iscsi://"+tcpAddr+"/iqn.2026-11.io.ddpstore:disk1/0").CombinedOutput()
	if err != nil || !strings.Contains(string(out2), "DIRECT_ACCESS") {
		t.Fatalf("iscsi-inq over the iscsi-tcp portal: %v\n%s", err, out2)
	}
}
