package siw

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestSiwInterop boots the vmlab guest (building it first when it is
// missing) and runs this package's TestGuest* tests inside it, against the
// guest kernel's siw. Each guest scenario captures its TCP port on the
// guest's lo into the shared directory; after the VM exits, the captures are
// decoded here with tshark (pcap_test.go). Set SIW_PCAP_KEEP to a directory
// that does not exist yet to keep them.
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
	// One retry: under TCG, single runs have been seen to lose the start of
	// a capture, and once a capture showed a bad CRC and a Terminate after
	// all pings had been validated (docs/interop.md). A real interop break
	// fails both attempts; the first attempt's output stays in the log.
	for attempt := 1; ; attempt++ {
		problem := runGuest(t, vmlab)
		if problem == "" {
			return
		}
		if attempt == 2 {
			t.Fatalf("%s (on both attempts: see the logs above)", problem)
		}
		t.Logf("ATTEMPT 1 FAILED: %s; booting the guest once more", problem)
	}
}

// runGuest boots the guest once, runs the TestGuest* tests in it and checks
// their captures in a child test process, so that a failure can be retried;
// it returns what went wrong, or "".
func runGuest(t *testing.T, vmlab string) string {
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
	start := time.Now()
	err := cmd.Run()
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out.String())
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 125 && bytes.Contains(out.Bytes(), []byte("qemu")) {
		t.Skipf("qemu could not run the guest: %s", out.String())
	}
	captures := filepath.Join(dir, pcapDir)
	if keep := os.Getenv("SIW_PCAP_KEEP"); keep != "" {
		if cerr := os.CopyFS(keep, os.DirFS(captures)); cerr != nil {
			t.Logf("keeping the captures in %s: %v", keep, cerr)
		} else {
			t.Logf("captures kept in %s (decode them again with SIW_PCAP_DIR=%s -run TestSiwCaptures)", keep, keep)
		}
	}
	if err != nil {
		return fmt.Sprintf("guest tests: %v", err)
	}
	if !bytes.Contains(out.Bytes(), []byte("--- PASS: TestGuest")) {
		return "no guest test passed"
	}
	dec := exec.Command("go", "test", "-count=1", "-v", "-run", "^TestSiwCaptures$", ".")
	dec.Env = append(os.Environ(), "SIW_PCAP_DIR="+captures)
	dout, derr := dec.CombinedOutput()
	t.Logf("capture checks (tshark):\n%s", dout)
	if derr != nil {
		return fmt.Sprintf("capture checks: %v", derr)
	}
	if bytes.Contains(dout, []byte("--- SKIP: TestSiwCaptures")) {
		t.Log("the captures were not decoded (see the skip reason above)")
	}
	return ""
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
