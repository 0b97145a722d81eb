// Package vmlab is what the tests that run inside the vmlab guest
// (../shared/vmlab beside the repository) share on the host: finding the
// lab, building the guest once, building static test binaries, and
// booting the guest to run a command.
package vmlab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Host is where a host-side test that boots the guest starts: it skips
// inside the guest (the guest-side tests run there) and under -short, and
// otherwise returns the lab's directory with the guest built (Dir, Ensure).
func Host(t testing.TB) string {
	t.Helper()
	if os.Getenv("VMLAB_GUEST") == "1" {
		t.Skip("inside the guest: the guest-side tests run here")
	}
	if testing.Short() {
		t.Skip("-short: not booting the vmlab guest")
	}
	lab := Dir(t)
	Ensure(t, lab)
	return lab
}

// SyncBuffer is a bytes.Buffer that a child process's output and the test
// may use at the same time.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Dir locates shared/vmlab: $VMLAB_HOME, or ../shared/vmlab beside the
// repository. Without it the test skips.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, p := range []string{os.Getenv("VMLAB_HOME"), filepath.Join(root, "..", "shared", "vmlab")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "run-vm.sh")); err == nil {
			return p
		}
	}
	t.Skip("no shared/vmlab beside the repository (set VMLAB_HOME to its directory)")
	return ""
}

// Ensure builds the guest with build-vm.sh when qemu or the guest's
// kernel and initramfs are missing. Building needs root (apt-get): as
// anyone else the test skips.
func Ensure(t testing.TB, dir string) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err == nil && Built() {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("the vmlab guest is not built and building it needs root (apt-get)")
	}
	// go test runs several packages' tests at once, and each of them
	// may find the guest missing: one builds, the others wait for it
	// (two build-vm.sh in one work directory delete each other's files).
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(CacheDir(), ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatalf("locking the vmlab build: %v", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if _, err := exec.LookPath("qemu-system-x86_64"); err == nil && Built() {
		return // built while this test waited
	}
	t.Log("building the vmlab guest (once; cached under ~/.cache/vmlab)")
	out, err := exec.Command(filepath.Join(dir, "build-vm.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("build-vm.sh: %v\n%s", err, out)
	}
}

// CacheDir is build-vm.sh's work and output directory: $VMLAB_DIR, else
// vmlab under the user's cache directory.
func CacheDir() string {
	if dir := os.Getenv("VMLAB_DIR"); dir != "" {
		return dir
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "vmlab")
}

// Built reports whether build-vm.sh's outputs exist.
func Built() bool {
	for _, f := range []string{"vmlinuz", "initramfs.img"} {
		if _, err := os.Stat(filepath.Join(CacheDir(), "out", f)); err != nil {
			return false
		}
	}
	return true
}

// BuildTest compiles the tests of pkg (a package path or directory, as go
// test takes it) into the static binary out, which the guest runs.
func BuildTest(t testing.TB, pkg, out string) {
	t.Helper()
	build := exec.Command("go", "test", "-c", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest test binary of %s: %v\n%s", pkg, err, o)
	}
}

// Run boots the guest once with run-vm.sh args and returns the output of
// the command run there and its error. When qemu cannot run the guest at
// all, the test skips, saying why.
func Run(t testing.TB, dir string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "run-vm.sh"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 125 && bytes.Contains(out.Bytes(), []byte("qemu")) {
		t.Skipf("qemu could not run the guest: %s", out.String())
	}
	return out.Bytes(), err
}
