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

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/internal/testbin"
	log "github.com/sirupsen/logrus"
)

// The tests here run ddptarget as a process, built once with the race
// detector as integration/daemon does, and check that a daemon that cannot
// start exits with one line that names the cause and leaves nothing behind.

var ddptargetProg = &testbin.Program{Name: "ddptarget"}

// ddptarget returns the path of the built program.
func ddptarget(t *testing.T) string { return ddptargetProg.Path(t) }

func TestMain(m *testing.M) { testbin.Main(m) }

// freePort returns a loopback address nobody listens on now.
func freePort(t *testing.T) string { return testbin.FreeAddr(t) }

// targetConfig writes a configuration with one portal and one target with
// the given LUN lines ("{id: 0, memory: 1MiB}").
func targetConfig(t *testing.T, dir, listen string, luns ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "portals:\n  - listen: %s\ntargets:\n  - name: iqn.2026-11.io.ddpstore:t\n    luns:\n", listen)
	for _, l := range luns {
		fmt.Fprintf(&b, "      - %s\n", l)
	}
	p := filepath.Join(dir, "target.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// asNobody is how a test runs the program as an unprivileged user: as
// itself when it is not root, else as nobody (65534), which needs dir
// and its parent to be searchable.
func asNobody(t *testing.T, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &syscall.Credential{Uid: 65534, Gid: 65534}
}

// runTarget runs ddptarget with args and returns its exit code and stderr.
// A daemon that starts after all is stopped after 20 s.
func runTarget(t *testing.T, cred *syscall.Credential, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ddptarget(t), args...)
	cmd.WaitDelay = 5 * time.Second
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		if cred != nil {
			t.Skipf("cannot run ddptarget as uid %d: %v", cred.Uid, err)
		}
		t.Fatalf("ddptarget %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ddptarget %v started instead of failing:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// wantOneLine checks a failed start: exit status code and, on stderr,
// exactly one line that starts with "ddptarget: " and contains each of
// words, with no panic and no goroutine dump.
func wantOneLine(t *testing.T, code int, stderr string, wantCode int, words ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit status %d, want %d", code, wantCode)
	}
	if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
		t.Fatalf("stderr has a panic:\n%s", stderr)
	}
	line, rest, _ := strings.Cut(stderr, "\n")
	if rest != "" || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line:\n%s", stderr)
	}
	if !strings.HasPrefix(line, "ddptarget: ") {
		t.Errorf("stderr %q does not start with %q", line, "ddptarget: ")
	}
	for _, w := range words {
		if !strings.Contains(line, w) {
			t.Errorf("stderr %q does not say %q", line, w)
		}
	}
}

// TestStartPortInUse: another listener holds the portal's port. The LUN's
// file, which the start created, is removed again.
func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	img := filepath.Join(dir, "new.img")
	cfg := targetConfig(t, dir, l.Addr().String(), "{id: 0, path: "+img+", size: 1MiB}")
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "ddptarget: listen "+l.Addr().String()+": address already in use")
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store file the failed start created is still there: %v", err)
	}
}

// TestStartAddressNotHere: the portal's address is not one of this
// host's (192.0.2.1 is TEST-NET-1: nothing is sent, bind fails).
func TestStartAddressNotHere(t *testing.T) {
	dir := t.TempDir()
	cfg := targetConfig(t, dir, "192.0.2.1:3260", "{id: 0, memory: 1MiB}")
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "ddptarget: listen 192.0.2.1:3260: cannot assign requested address")
}

// TestStartPrivilegedPort: an unprivileged user cannot listen on port 1.
func TestStartPrivilegedPort(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n <= 1 {
			t.Skipf("ip_unprivileged_port_start is %d: every port is unprivileged", n)
		}
	}
	if os.Geteuid() != 0 {
		if l, err := net.Listen("tcp", "127.0.0.1:1"); err == nil {
			l.Close()
			t.Skip("this user may listen on privileged ports")
		}
	}
	dir := t.TempDir()
	cfg := targetConfig(t, dir, "127.0.0.1:1", "{id: 0, memory: 1MiB}")
	code, stderr := runTarget(t, asNobody(t, dir), "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "ddptarget: listen 127.0.0.1:1: permission denied")
}

// TestStartUnreadableStore: the LUN's file cannot be opened.
func TestStartUnreadableStore(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "locked.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o000); err != nil {
		t.Fatal(err)
	}
	cfg := targetConfig(t, dir, freePort(t), "{id: 0, path: "+img+"}")
	code, stderr := runTarget(t, asNobody(t, dir), "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "target iqn.2026-11.io.ddpstore:t LUN 0: ", img, "permission denied")
}

// TestStartStoreSizeMismatch: an existing file is not the configured
// size. It is left as it was, and the file that LUN 0 created before LUN 1
// failed is removed.
func TestStartStoreSizeMismatch(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.img")
	if err := os.WriteFile(small, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "new.img")
	cfg := targetConfig(t, dir, freePort(t),
		"{id: 0, path: "+img+", size: 1MiB}",
		"{id: 1, path: "+small+", size: 2MiB}")
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "target iqn.2026-11.io.ddpstore:t LUN 1: ", small, "has 1048576 octets, not the configured 2097152")
	if fi, err := os.Stat(small); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the mismatched file changed: %v", err)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store file the failed start created is still there: %v", err)
	}
}

// TestStartStoreIsDirectory: the LUN's path is a directory.
func TestStartStoreIsDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := targetConfig(t, dir, freePort(t), "{id: 0, path: "+dir+"}")
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "target iqn.2026-11.io.ddpstore:t LUN 0: ", dir, "is neither a regular file nor a block device")
}

// TestStartBadConfig: a configuration with one defect is one line naming
// the file, the line and the field, with exit status 2.
func TestStartBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := targetConfig(t, dir, freePort(t), "{id: 0, memory: 1000}")
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitUsage, cfg+":6:", "targets[0].luns[0].memory")
}

// TestStartCleanup calls start in this process, where what a failed start
// leaves open can be seen: a portal that cannot listen after one that did
// must leave that one free, no store mapped or open, and no created file.
func TestStartCleanup(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	old, img := filepath.Join(dir, "old.img"), filepath.Join(dir, "new.img")
	if err := os.WriteFile(old, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	first := freePort(t)
	cfg, err := config.ParseTarget("cleanup.yaml", fmt.Appendf(nil, `
portals:
  - listen: %s
  - listen: %s
targets:
  - name: iqn.2026-11.io.ddpstore:t
    luns:
      - {id: 0, path: %s}
      - {id: 1, path: %s, size: 1MiB}
      - {id: 2, memory: 1MiB}
`, first, busy.Addr(), old, img))
	if err != nil {
		t.Fatal(err)
	}
	l := log.New()
	l.SetOutput(io.Discard)
	d, err := start(cfg, log.NewEntry(l), "cleanup.yaml")
	if d != nil || err == nil || err.Error() != "listen "+busy.Addr().String()+": address already in use" {
		t.Fatalf("start = %v, %v; want nil and the busy portal's error", d, err)
	}
	if ln, err := net.Listen("tcp", first); err != nil {
		t.Errorf("the first portal is still listening: %v", err)
	} else {
		ln.Close()
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store file the failed start created is still there: %v", err)
	}
	if maps, _ := os.ReadFile("/proc/self/maps"); bytes.Contains(maps, []byte(old)) {
		t.Errorf("%s is still mapped", old)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == old {
			t.Errorf("%s is still open (fd %s)", old, fd.Name())
		}
	}
}

// TestStartOutOfMemory: a memory LUN (a store the target registers for
// RDMA) larger than the process may map, under a 4 GiB address space
// limit (ulimit -v, in the child only): one line names the LUN and the
// cause, the portal is not left listening and the file LUN 0 created is
// removed. The program is built without the race detector, whose shadow
// memory does not fit under such a limit.
func TestStartOutOfMemory(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ddptarget")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ddpstore/ddpstore/cmd/ddptarget").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img := filepath.Join(dir, "new.img")
	addr := freePort(t)
	cfg := targetConfig(t, dir, addr, "{id: 0, path: "+img+", size: 1MiB}", "{id: 1, memory: 16GiB}")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -v 4194304 && exec "$@"`, "sh", bin, "--config", cfg)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ddptarget started instead of failing:\n%s", stderr.String())
	}
	wantOneLine(t, cmd.ProcessState.ExitCode(), stderr.String(), exitFailed,
		"target iqn.2026-11.io.ddpstore:t LUN 1: ", "memory store of 17179869184 octets", "cannot allocate memory")
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store file the failed start created is still there: %v", err)
	}
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("the portal is still taken: %v", err)
	} else {
		l.Close()
	}
}
