package siw

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSiwInterop boots the vmlab guest (building it first when it is
// missing) and runs this package's TestGuest* tests inside it, against the
// guest kernel's siw.
func TestSiwInterop(t *testing.T) {
	if os.Getenv("VMLAB_GUEST") == "1" {
		t.Skip("inside the guest: the TestGuest* tests run here")
	}
	if testing.Short() {
		t.Skip("-short: not booting the vmlab guest")
	}
	vmlab := findVMLab(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil || !built() {
		if os.Geteuid() != 0 {
			t.Skip("the vmlab guest is not built and building it needs root (apt-get)")
		}
		t.Log("building the vmlab guest (once; cached under ~/.cache/vmlab)")
		out, err := exec.Command(filepath.Join(vmlab, "build-vm.sh")).CombinedOutput()
		if err != nil {
			t.Fatalf("build-vm.sh: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "siw.test"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest test binary: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(vmlab, "run-vm.sh"), "-d", dir, "-t", "300", "--",
		"./siw.test", "-test.v", "-test.run", "^TestGuest")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("guest output:\n%s", out.String())
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 125 && bytes.Contains(out.Bytes(), []byte("qemu")) {
		t.Skipf("qemu could not run the guest: %s", out.String())
	}
	if err != nil {
		t.Fatalf("guest tests: %v", err)
	}
	if !bytes.Contains(out.Bytes(), []byte("--- PASS: TestGuest")) {
		t.Fatal("no guest test passed")
	}
}

// findVMLab locates ../shared/vmlab beside the repository.
func findVMLab(t *testing.T) string {
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

// built reports whether build-vm.sh's outputs exist.
func built() bool {
	dir := os.Getenv("VMLAB_DIR")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "vmlab")
	}
	for _, f := range []string{"vmlinuz", "initramfs.img"} {
		if _, err := os.Stat(filepath.Join(dir, "out", f)); err != nil {
			return false
		}
	}
	return true
}
