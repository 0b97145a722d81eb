package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ddpstore/ddpstore/integration/guesttools"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const initiatorIQN = "iqn.2026-11.io.ddpstore:vmlab-peers"

// TestGuestInitiatorLIO runs ddpinitiator over iSER against LIO's isert.
func TestGuestInitiatorLIO(t *testing.T) {
	inGuest(t)
	t.Cleanup(func() { logDmesg(t) })
	exerciseInitiator(t, startLIO(t), lioIQN, lioLUN)
}

// TestGuestInitiatorTgt runs ddpinitiator over iSER against tgtd's iSER
// driver. libiscsi's iscsi-inq logs in first, as a control whose outcome
// is only logged: when ours fails, it tells whether tgtd refuses everyone.
func TestGuestInitiatorTgt(t *testing.T) {
	inGuest(t)
	portal := startTgtd(t)
	ctl, err := runProg(t, time.Minute, "iscsi-inq", "-i", libiscsiInq, "iser://"+portal+"/"+tgtIQN+"/"+strconv.Itoa(tgtLUN))
	t.Logf("control, libiscsi's iscsi-inq over iSER (err %v):\n%s", err, strings.TrimSpace(ctl))
	exerciseInitiator(t, portal, tgtIQN, tgtLUN)
}

// exerciseInitiator runs what a user of ddpinitiator would against a
// target: discovery, login, verified benches (small I/Os at depth, and
// large ones, many RDMA segments each) and a mounted fio verify.
func exerciseInitiator(t *testing.T, portal, iqn string, lun int) {
	t.Run("discover", func(t *testing.T) {
		out, code := ddpinitiator(t, "discover", "--initiator-name", initiatorIQN, portal)
		if code != 0 || !strings.Contains(out, iqn) {
			t.Fatalf("discover: exit %d\n%s", code, out)
		}
		t.Logf("%s", out)
	})
	t.Run("login", func(t *testing.T) {
		out, code := ddpinitiator(t, "login", "--initiator-name", initiatorIQN, "--target", iqn, portal)
		if want := fmt.Sprintf("LUN %d: ", lun); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("login: exit %d, want %q\n%s", code, want, out)
		}
		t.Logf("%s", out)
	})
	for _, c := range []struct {
		bs    string
		depth int
	}{{"4KiB", 8}, {"256KiB", 4}} {
		t.Run("bench "+c.bs, func(t *testing.T) {
			out, code := ddpinitiator(t, "bench", "--initiator-name", initiatorIQN, "--target", iqn, "--lun", strconv.Itoa(lun),
				"--rw", "randrw", "--verify", "--bs", c.bs, "--iodepth", strconv.Itoa(c.depth), "--runtime", "2s",
				"--buffers", "16MiB", "--json", portal)
			var res struct {
				IOs          int64   `json:"ios"`
				IOPS         float64 `json:"iops"`
				MBps         float64 `json:"mb_per_s"`
				Verified     bool    `json:"verified"`
				VerifyErrors int64   `json:"verify_errors"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.IOs == 0 || !res.Verified || res.VerifyErrors != 0 {
				t.Fatalf("bench: exit %d, %+v\n%s", code, res, out)
			}
			t.Logf("%d I/Os, %.0f IOPS, %.1f MB/s (TCG), 0 verify errors", res.IOs, res.IOPS, res.MBps)
		})
	}
	t.Run("mount fio verify", func(t *testing.T) { mountFio(t, portal, iqn, lun) })
}

// ddpinitiator runs the staged initiator and returns its combined output
// and exit status.
func ddpinitiator(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "./"+initiator, args...)
	out, _ := c.CombinedOutput()
	return string(out), c.ProcessState.ExitCode()
}

// mountFio mounts the target's LUN with "ddpinitiator mount" and runs
// examples/fio/verify.fio on 2 MiB of its file (16 MiB took over five minutes under TCG on a busy host, 4 MiB 33 s on a quiet one and 212 s on a busy one).
func mountFio(t *testing.T, portal, iqn string, lun int) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("the guest has no /dev/fuse: %v", err)
	}
	runDir, dir := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "initiator.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("initiator_name: %s\nbuffers: 16MiB\ntargets:\n  - name: %s\n    portals: [%s]\n    luns: [%d]\n",
		initiatorIQN, iqn, portal, lun)), 0o644)
	out, code := ddpinitiator(t, "mount", "--daemon", "--run-dir", runDir, "--config", cfg, dir)
	file := filepath.Join(dir, fmt.Sprintf("lun%d", lun))
	if code != 0 || !strings.Contains(out, file) {
		t.Fatalf("mount: exit %d\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := ddpinitiator(t, "umount", "--run-dir", runDir, dir); code != 0 {
			t.Errorf("umount: exit %d\n%s", code, out)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	job, _ := filepath.Abs(fioJob)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := prog(ctx, "fio", "--output-format=json", job)
	cmd.Env = append(os.Environ(), "DDP_FILE="+file, "DDP_SIZE=2M")
	cmd.Dir = t.TempDir() // fio leaves its verify state files in its working directory
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("fio: %v\n%s\n%s", err, stderr.String(), stdout.String())
	}
	guesttools.CheckFio(t, stdout.Bytes(), 3)
	t.Logf("fio verify: 3 jobs, no verify errors (%.0f s)", time.Since(start).Seconds())
}
