package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const mountTarget = "iqn.2026-11.io.ddpstore:disk1"

// needMount skips, saying why, where FUSE cannot be mounted.
func needMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ddpinitiator mount needs root (FUSE mounted directly)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("this kernel has no FUSE: %v", err)
	}
}

// need finds a program, installing its Debian package with apt-get when it
// is missing and we are root.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(prog); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Skipf("%s is missing, and installing it needs root", prog)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The package lists may be missing on a fresh machine.
		if upd, uerr := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); uerr != nil {
			t.Fatalf("apt-get update: %v\n%s", uerr, upd)
		}
		cmd = exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "--no-install-recommends", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err = cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get install %s: %v\n%s", pkg, err, out)
		}
	}
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s installed but not found: %v\n%s", pkg, err, out)
	}
	return p
}

// run runs a command and returns its combined output and exit status.
func run(name string, args ...string) (string, int) {
	c := exec.Command(name, args...)
	out, _ := c.CombinedOutput()
	return string(out), c.ProcessState.ExitCode()
}

// mustRun runs a command and fails the test unless it exits 0.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, code := run(name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), code, out)
	}
	return out
}

// mountRig is a ddptarget process and a ddpinitiator mount of its target.
type mountRig struct {
	addr, runDir, dir, cfg string
	target                 *proc
}

// startMount starts ddptarget with the LUN lines given and mounts its
// target with "ddpinitiator mount --daemon" plus flags; the mount is undone
// when the test ends.
func startMount(t *testing.T, luns string, flags ...string) *mountRig {
	t.Helper()
	needMount(t)
	r := &mountRig{addr: freePort(t), runDir: t.TempDir(), dir: t.TempDir()}
	r.cfg = writeConfig(t, t.TempDir(), fmt.Sprintf("portals:\n  - listen: %s\ntargets:\n  - name: %s\n    luns:\n%s", r.addr, mountTarget, luns))
	r.target = startTarget(t, r.cfg, r.addr)
	args := append([]string{"mount", "--daemon", "--run-dir", r.runDir, "--target", mountTarget}, flags...)
	out := mustRun(t, ddpinitiator(t), append(args, r.addr, r.dir)...)
	if !strings.Contains(out, filepath.Join(r.dir, "lun0")) {
		t.Fatalf("mount output does not name the LUN file:\n%s", out)
	}
	t.Cleanup(func() {
		if out, code := run(ddpinitiator(t), "umount", "--run-dir", r.runDir, r.dir); code != 0 {
			t.Errorf("umount: exit %d\n%s", code, out)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(r.runDir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	return r
}

// fio runs examples/fio/verify.fio (or another job file) on file and
// returns its JSON result; it fails the test unless fio exits 0.
type fioResult struct {
	Jobs []struct {
		Name  string `json:"jobname"`
		Error int    `json:"error"`
		Read  struct {
			IOBytes int64   `json:"io_bytes"`
			IOPS    float64 `json:"iops"`
		} `json:"read"`
		Write struct {
			IOBytes int64   `json:"io_bytes"`
			IOPS    float64 `json:"iops"`
		} `json:"write"`
	} `json:"jobs"`
}

func fio(t *testing.T, job, file, size string, extra ...string) fioResult {
	t.Helper()
	bin := need(t, "fio", "fio")
	job, err := filepath.Abs(job)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--output-format=json"}, extra...)
	cmd := exec.Command(bin, append(args, job)...)
	cmd.Env = append(os.Environ(), "DDP_FILE="+file, "DDP_SIZE="+size)
	cmd.Dir = t.TempDir() // fio leaves its verify state files in its working directory
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fio %s: %v\n%s\n%s", job, err, stderr.String(), stdout.String())
	}
	var res fioResult
	// fio may print notes before the JSON.
	out := stdout.Bytes()
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("fio output: %v\n%s", err, stdout.String())
	}
	for _, j := range res.Jobs {
		if j.Error != 0 || j.Write.IOBytes == 0 && j.Read.IOBytes == 0 {
			t.Errorf("fio job %s: error %d, read %d, written %d", j.Name, j.Error, j.Read.IOBytes, j.Write.IOBytes)
		}
	}
	return res
}

// TestMountFioVerify: fio writes through the mount with psync and libaio,
// O_DIRECT, and reads every block back checking its CRC32c.
func TestMountFioVerify(t *testing.T) {
	r := startMount(t, "      - {id: 0, memory: 128MiB}\n")
	res := fio(t, "../../examples/fio/verify.fio", filepath.Join(r.dir, "lun0"), "32M")
	if len(res.Jobs) != 3 {
		t.Errorf("fio ran %d jobs, want 3", len(res.Jobs))
	}
}

// TestAttachMkfsRemount: attach, mkfs.ext4, mount, write files, unmount,
// detach; attach again, fsck finds nothing, and the files read back the same.
func TestAttachMkfsRemount(t *testing.T) {
	needMount(t)
	mkfs := need(t, "mkfs.ext4", "e2fsprogs")
	addr, runDir := freePort(t), t.TempDir()
	startTarget(t, writeConfig(t, t.TempDir(), fmt.Sprintf("portals:\n  - listen: %s\ntargets:\n  - name: %s\n    luns:\n      - {id: 0, memory: 256MiB}\n", addr, mountTarget)), addr)
	ini := ddpinitiator(t)
	attach := func() string {
		dev := strings.TrimSpace(mustRun(t, ini, "attach", "--run-dir", runDir, "--target", mountTarget, addr))
		if !strings.HasPrefix(dev, "/dev/loop") || strings.Contains(dev, "\n") {
			t.Fatalf("attach printed %q, want one /dev/loopN", dev)
		}
		t.Cleanup(func() { run(ini, "detach", "--run-dir", runDir, dev) })
		return dev
	}
	fsDir := t.TempDir()
	dev := attach()
	if out := mustRun(t, ini, "status", "--run-dir", runDir); !strings.Contains(out, "lun0") || !strings.Contains(out, "-> "+dev) || !strings.Contains(out, "served") {
		t.Errorf("status does not show the attachment:\n%s", out)
	}
	mustRun(t, mkfs, "-q", "-F", dev)
	mustRun(t, "mount", dev, fsDir)
	sums := map[string][sha256.Size]byte{}
	rng := rand.New(rand.NewSource(11))
	for i, size := range []int{1, 4096, 100000, 3 << 20, 17 << 20} {
		b := make([]byte, size)
		rng.Read(b)
		name := fmt.Sprintf("file%d", i)
		if err := os.WriteFile(filepath.Join(fsDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sums[name] = sha256.Sum256(b)
	}
	// Detach refuses while the filesystem is mounted.
	if out, code := run(ini, "detach", "--run-dir", runDir, dev); code == 0 || !strings.Contains(out, "mounted") {
		t.Errorf("detach of a mounted device: exit %d\n%s", code, out)
	}
	mustRun(t, "umount", fsDir)
	mustRun(t, ini, "detach", "--run-dir", runDir, dev)
	if b, _ := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop/backing_file")); len(b) > 0 {
		t.Errorf("%s still attached to %s", dev, b)
	}

	dev = attach()
	if out, code := run("e2fsck", "-fn", dev); code != 0 {
		t.Errorf("e2fsck after detach and re-attach: exit %d\n%s", code, out)
	}
	mustRun(t, "mount", dev, fsDir)
	defer mustRun(t, "umount", fsDir)
	for name, want := range sums {
		b, err := os.ReadFile(filepath.Join(fsDir, name))
		if err != nil || sha256.Sum256(b) != want {
			t.Errorf("%s after remount: %v, checksum matches %v", name, err, sha256.Sum256(b) == want)
		}
	}
}

// TestKillTargetDuringFio: kill -9 the target while fio writes through the
// mount, start it again; the initiator reconnects, reissues what was in
// flight, and fio finishes with every block verified.
func TestKillTargetDuringFio(t *testing.T) {
	img := filepath.Join(t.TempDir(), "lun0.img")
	r := startMount(t, fmt.Sprintf("      - {id: 0, path: %s, size: 64MiB}\n", img), "--recovery-timeout", "60s", "--nop-interval", "1s")
	bin := need(t, "fio", "fio")
	job := filepath.Join(t.TempDir(), "kill.fio")
	// A rate limit keeps the write phase a few seconds long, so the kill
	// lands in its middle.
	os.WriteFile(job, []byte(`[global]
filename=${DDP_FILE}
size=48M
direct=1
ioengine=libaio
iodepth=16
bs=64k
verify=crc32c
verify_fatal=1
do_verify=1
[write-through-a-crash]
rw=randwrite
rate=12m
`), 0o644)
	cmd := exec.Command(bin, "--output-format=json", job)
	cmd.Env = append(os.Environ(), "DDP_FILE="+filepath.Join(r.dir, "lun0"))
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fioDone := make(chan error, 1)
	go func() { fioDone <- cmd.Wait() }()

	time.Sleep(1500 * time.Millisecond) // into the write phase
	r.target.cmd.Process.Signal(syscall.SIGKILL)
	<-r.target.done
	select {
	case err := <-fioDone:
		t.Fatalf("fio ended when the target died: %v\n%s", err, out.String())
	case <-time.After(time.Second):
	}
	r.target = startTarget(t, r.cfg, r.addr)
	select {
	case err := <-fioDone:
		if err != nil {
			t.Fatalf("fio after the target's restart: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("fio did not finish after the target's restart\n%s", out.String())
	}
	if !strings.Contains(out.String(), `"error" : 0`) {
		t.Errorf("fio reports an error:\n%s", out.String())
	}
	logs, _ := filepath.Glob(filepath.Join(r.runDir, "*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); !strings.Contains(string(b), "reconnect") {
			t.Errorf("the mount's log does not mention the reconnect:\n%s", b)
		}
	}
}

// TestMountRefused: a target that refuses the login gives a one-line
// reason and exit status 1, and nothing is left mounted.
func TestMountRefused(t *testing.T) {
	needMount(t)
	addr := freePort(t)
	startTarget(t, writeConfig(t, t.TempDir(), fmt.Sprintf("portals:\n  - listen: %s\ntargets:\n  - name: %s\n    initiators: [iqn.2026-11.io.ddpstore:someone-else]\n    luns:\n      - {id: 0, memory: 16MiB}\n", addr, mountTarget)), addr)
	dir, runDir := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		name  string
		args  []string
		words string
	}{
		{"not allowed", []string{"--target", mountTarget}, "authoriz"},
		{"no such target", []string{"--target", "iqn.2026-11.io.ddpstore:nope"}, "not found"},
	} {
		for _, daemon := range []bool{false, true} {
			args := append([]string{"mount", "--run-dir", runDir}, c.args...)
			if daemon {
				args = append(args, "--daemon")
			}
			out, code := run(ddpinitiator(t), append(args, addr, dir)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(strings.ToLower(out), c.words) {
				t.Errorf("%s (daemon %v): exit %d, want 1 and one line saying %q:\n%s", c.name, daemon, code, c.words, out)
			}
		}
	}
	if _, ok, _ := findMountPoint(dir); ok {
		t.Errorf("%s is mounted after refused logins", dir)
	}
	if out, code := run(ddpinitiator(t), "umount", "--run-dir", runDir, dir); code != 1 || !strings.Contains(out, "not mounted") {
		t.Errorf("umount of what is not mounted: exit %d\n%s", code, out)
	}
	if out, code := run(ddpinitiator(t), "attach", "--nbd", addr); code != 2 || !strings.Contains(out, "nbd") {
		t.Errorf("attach --nbd: exit %d\n%s", code, out)
	}
}

// findMountPoint reports whether dir is a mount point.
func findMountPoint(dir string) (string, bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return line, true, nil
		}
	}
	return "", false, nil
}
