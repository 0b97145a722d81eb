// Package vmlab is what the tests that run inside the vmlab guest
// (../shared/vmlab beside the repository) share on the host: finding the
// lab, building the guest once, building static test binaries, and
// booting the guest to run a command.
package vmlab

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
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

// ModulesList is the file CopyModules writes beside the modules: their
// file names, one a line, each after its dependencies (the order insmod
// accepts).
const ModulesList = "modules.order"

// GuestKABI is the guest kernel's release, from build-vm.sh's manifest
// ("kernel:   linux-image-6.1.0-56-amd64 6.1.192-2 ...").
func GuestKABI(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(CacheDir(), "out", "manifest.txt"))
	if err != nil {
		t.Fatalf("the guest's kernel release: %v", err)
	}
	m := regexp.MustCompile(`(?m)^kernel:\s+linux-image-(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no kernel line in %s/out/manifest.txt", CacheDir())
	}
	return string(m[1])
}

// GuestModuleTree finds the guest kernel's full module tree: build-vm.sh
// extracts the kernel package under its work directory and copies only
// the modules the lab needs into the image. The modules of the very kernel
// the guest boots are what a test insmods there, so they are taken from
// that package: the work directory's copy, or the package itself,
// downloaded with apt-get.
func GuestModuleTree(t testing.TB) string {
	t.Helper()
	kabi := GuestKABI(t)
	tree := filepath.Join(CacheDir(), "work", "kernel-"+kabi, "lib", "modules", kabi)
	if _, err := os.Stat(filepath.Join(tree, "modules.dep")); err == nil {
		return tree
	}
	dl := t.TempDir()
	get := exec.Command("apt-get", "download", "linux-image-"+kabi)
	get.Dir = dl
	if out, err := get.CombinedOutput(); err != nil {
		t.Fatalf("no %s and apt-get download linux-image-%s: %v\n%s", tree, kabi, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("apt-get download linux-image-%s left %v", kabi, debs)
	}
	root := filepath.Join(dl, "root")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", debs[0], err, out)
	}
	return filepath.Join(root, "lib", "modules", kabi)
}

// CopyModules copies the guest kernel's modules names and their
// dependencies into dst, and writes dst/ModulesList. why says what a
// missing module means, for the failure.
func CopyModules(t testing.TB, dst string, names []string, why string) {
	t.Helper()
	tree := GuestModuleTree(t)
	f, err := os.Open(filepath.Join(tree, "modules.dep"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps := map[string][]string{} // module path -> dependency paths
	byName := map[string]string{} // module name -> path
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[ModuleName(mod)] = mod
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var order []string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(mod string) {
		if seen[mod] {
			return
		}
		seen[mod] = true
		for _, d := range deps[mod] {
			visit(d)
		}
		order = append(order, mod)
	}
	for _, name := range names {
		mod, ok := byName[name]
		if !ok {
			t.Fatalf("the guest kernel (%s) has no %s module: %s", tree, name, why)
		}
		visit(mod)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var list strings.Builder
	for _, mod := range order {
		b, err := os.ReadFile(filepath.Join(tree, mod))
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(mod)
		if err := os.WriteFile(filepath.Join(dst, base), b, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&list, base)
	}
	if err := os.WriteFile(filepath.Join(dst, ModulesList), []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest modules (from %s): %s", tree, strings.Join(strings.Fields(list.String()), " "))
}

// ModuleName is the module name of a modules.dep path, as /sys/module
// spells it.
func ModuleName(path string) string {
	base, _, _ := strings.Cut(filepath.Base(path), ".ko")
	return strings.ReplaceAll(base, "-", "_")
}

// InGuest skips a guest-side test on the host: it runs only inside the
// vmlab guest (VMLAB_GUEST=1), where needs (what the guest provides for
// it) and the host-side test bootedBy (which boots the guest and runs it)
// say why.
func InGuest(t testing.TB, needs, bootedBy string) {
	t.Helper()
	if os.Getenv("VMLAB_GUEST") != "1" {
		t.Skipf("runs inside the vmlab guest (%s); %s boots it", needs, bootedBy)
	}
}
