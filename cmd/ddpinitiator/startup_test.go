package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/testbin"
)

// The tests here run ddpinitiator as a process, built once with the race
// detector as integration/daemon does, and check that a command that
// cannot start exits with one line that names the cause.

var ddpinitiatorProg = &testbin.Program{Name: "ddpinitiator"}

// ddpinitiator returns the path of the built program.
func ddpinitiator(t *testing.T) string { return ddpinitiatorProg.Path(t) }

func TestMain(m *testing.M) { testbin.Main(m) }

// closedPort returns a loopback address nobody listens on now.
func closedPort(t *testing.T) string { return testbin.FreeAddr(t) }

// runInitiator runs ddpinitiator with args and returns its exit code and
// stderr.
func runInitiator(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ddpinitiator(t), args...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("ddpinitiator %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ddpinitiator %v did not fail within 30 s:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// wantOneLine checks a failed command: a non-zero exit status (wantCode
// unless it is 0) and, on stderr, exactly one line that contains each of
// words, with no panic and no goroutine dump.
func wantOneLine(t *testing.T, code int, stderr string, wantCode int, words ...string) {
	t.Helper()
	if code == 0 || wantCode != 0 && code != wantCode {
		t.Errorf("exit status %d, want %d", code, wantCode)
	}
	if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
		t.Fatalf("stderr has a panic:\n%s", stderr)
	}
	line, rest, _ := strings.Cut(stderr, "\n")
	if rest != "" || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line:\n%s", stderr)
	}
	for _, w := range words {
		if !strings.Contains(line, w) {
			t.Errorf("stderr %q does not say %q", line, w)
		}
	}
}

// TestConnectionRefused: nobody listens on the portal.
func TestConnectionRefused(t *testing.T) {
	addr := closedPort(t)
	for _, cmd := range []string{"login", "discover", "bench"} {
		t.Run(cmd, func(t *testing.T) {
			code, stderr := runInitiator(t, cmd, addr)
			wantOneLine(t, code, stderr, exitFailed, "ddpinitiator: ", " "+addr+": ", "connection refused")
		})
	}
}

// TestBadAddress: the portal on the command line is no address.
func TestBadAddress(t *testing.T) {
	for _, c := range []struct{ portal, words string }{
		{"127.0.0.1:99999", "invalid port"},
		{"127.0.0.1:iscsi-nope", "unknown port"},
	} {
		t.Run(c.portal, func(t *testing.T) {
			code, stderr := runInitiator(t, "login", c.portal)
			wantOneLine(t, code, stderr, 0, "ddpinitiator: login to ", c.portal, c.words)
		})
	}
}

// TestBadConfig: a configuration with one defect is one line naming the
// file, the line and the field, with exit status 2.
func TestBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "initiator.yaml")
	body := "initiator_name: iqn.2026-11.io.ddpstore:host1\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    portals: [\":3260\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := runInitiator(t, "login", "--config", cfg)
	wantOneLine(t, code, stderr, exitUsage, "ddpinitiator: "+cfg+":4:", "targets[0].portals[0]", "has no host")
	code, stderr = runInitiator(t, "login", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	wantOneLine(t, code, stderr, exitUsage, "ddpinitiator: open ", "missing.yaml: no such file or directory")
}

// TestMountPointMissing: mount (in the foreground and as a daemon) on a
// directory that does not exist fails before it dials, and the daemon
// form leaves no run directory behind.
func TestMountPointMissing(t *testing.T) {
	tmp := t.TempDir()
	dir, runDir := filepath.Join(tmp, "missing"), filepath.Join(tmp, "run")
	for _, daemon := range []bool{false, true} {
		args := []string{"mount", "--run-dir", runDir}
		if daemon {
			args = append(args, "--daemon")
		}
		code, stderr := runInitiator(t, append(args, closedPort(t), dir)...)
		wantOneLine(t, code, stderr, exitUsage, "ddpinitiator mount: mount point: stat "+dir+": no such file or directory")
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed mounts made %s: %v", runDir, err)
	}
}

// runWithDev runs ddpinitiator with args as runInitiator does, but in a
// mount namespace of its own whose /dev is an empty tmpfs holding
// /dev/null and the device nodes of nodes ("fuse c 10 229"): the devices
// the program needs are really missing for it, and the host's /dev is
// untouched. Needs root (CLONE_NEWNS, mount, mknod).
func runWithDev(t *testing.T, nodes []string, args ...string) (int, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace with its own /dev needs root")
	}
	script := "mount -t tmpfs -o mode=755 ddp-test-dev /dev || exit 97\nmknod -m 666 /dev/null c 1 3 || exit 97\n"
	for _, n := range nodes {
		script += "mknod -m 666 /dev/" + n + " || exit 97\n"
	}
	script += `exec "$@"` + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, "sh", ddpinitiator(t)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot run in a mount namespace of its own: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ddpinitiator %v did not fail within 30 s:\n%s", args, stderr.String())
	}
	if cmd.ProcessState.ExitCode() == 97 {
		t.Skipf("cannot make a /dev of its own: %s", stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// noDriver returns a character device major number that no driver has
// registered (from the local/experimental range 240-254): opening a node
// with it fails as a /dev/fuse or /dev/loop-control does whose module is
// not loaded.
func noDriver(t *testing.T) int {
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Skip(err)
	}
	chars, _, _ := strings.Cut(string(b), "Block devices:")
	used := map[string]bool{}
	for _, l := range strings.Split(chars, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			used[f[0]] = true
		}
	}
	for m := 240; m <= 254; m++ {
		if !used[strconv.Itoa(m)] {
			return m
		}
	}
	t.Skip("every major of 240-254 has a driver")
	return 0
}

// TestNoFUSE: mount (in the foreground and as a daemon) and attach where
// FUSE cannot be mounted, because /dev/fuse is missing or because its
// module is not loaded (a node with no driver behind it), fail with one
// line naming it before they dial, and leave no run directory.
func TestNoFUSE(t *testing.T) {
	for _, c := range []struct {
		name string
		fuse []string
		why  string
	}{
		{"missing", nil, "open /dev/fuse: no such file or directory"},
		{"no module", []string{fmt.Sprintf("fuse c %d 229", noDriver(t))}, "open /dev/fuse: no such device or address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			runDir := filepath.Join(tmp, "run")
			nodes := append([]string{"loop-control c 10 237"}, c.fuse...)
			for _, args := range [][]string{
				{"mount", "--run-dir", runDir, closedPort(t), tmp},
				{"mount", "--daemon", "--run-dir", runDir, closedPort(t), tmp},
			} {
				code, stderr := runWithDev(t, nodes, args...)
				wantOneLine(t, code, stderr, exitUsage, "ddpinitiator mount: this kernel has no FUSE: "+c.why+" (is the fuse module loaded?)")
			}
			code, stderr := runWithDev(t, nodes, "attach", "--run-dir", runDir, closedPort(t))
			wantOneLine(t, code, stderr, exitFailed, "ddpinitiator attach: this kernel has no FUSE: "+c.why+" (is the fuse module loaded?)")
			if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed starts made %s: %v", runDir, err)
			}
		})
	}
}

// TestNoLoop: attach where loop devices cannot be made, because
// /dev/loop-control is missing or its module is not loaded, fails with one
// line naming it before it mounts or dials, and leaves no run directory.
func TestNoLoop(t *testing.T) {
	for _, c := range []struct {
		name string
		ctl  []string
		why  string
	}{
		{"missing", nil, "open /dev/loop-control: no such file or directory"},
		{"no module", []string{fmt.Sprintf("loop-control c %d 237", noDriver(t))}, "open /dev/loop-control: no such device or address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runDir := filepath.Join(t.TempDir(), "run")
			code, stderr := runWithDev(t, append([]string{"fuse c 10 229"}, c.ctl...), "attach", "--run-dir", runDir, closedPort(t))
			wantOneLine(t, code, stderr, exitFailed, "ddpinitiator attach: no loop devices: "+c.why+" (is the loop module loaded?)")
			if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed start made %s: %v", runDir, err)
			}
		})
	}
}

// plainBuild builds cmd/name without the race detector, whose shadow
// memory a process under an address space limit cannot map.
func plainBuild(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ddpstore/ddpstore/cmd/"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

// TestOutOfMemoryForBuffers: bench's registered buffers (16 GiB for 1024
// I/Os of 16 MiB) under a 4 GiB address space limit (ulimit -v, in the
// child only) cannot be mapped: one line says so and what to change, and
// the target is never dialled, since the buffers are mapped first.
func TestOutOfMemoryForBuffers(t *testing.T) {
	bin := plainBuild(t, "ddpinitiator")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -v 4194304 && exec "$@"`, "sh", bin,
		"bench", "--bs", "16MiB", "--iodepth", "1024", l.Addr().String())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	wantOneLine(t, cmd.ProcessState.ExitCode(), stderr.String(), exitFailed,
		"ddpinitiator: out of memory for the registered buffers: 16384 MiB cannot be mapped (cannot allocate memory); lower the I/O depth or size")
	l.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the initiator connected to the target although it had no buffers")
	}
}
