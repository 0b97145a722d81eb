package peers

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
	"golang.org/x/sys/unix"
)

// guestAddr is the vmlab guest's eth0, where siw0 is attached; every
// target listens there and traffic to it goes over lo.
const guestAddr = "10.0.2.15"

func inGuest(t *testing.T) {
	t.Helper()
	vmlab.InGuest(t, "Linux siw, LIO, tgtd", "TestPeers")
	setupOnce.Do(setupGuest)
	if setupErr != "" {
		t.Fatal(setupErr)
	}
}

var (
	setupOnce sync.Once
	setupErr  string
)

// setupGuest loads the modules the host staged, attaches siw to eth0,
// lifts the locked-memory limit (libiscsi and tgtd register their buffers
// with ibv_reg_mr, which counts against RLIMIT_MEMLOCK, 8 MiB in the
// guest; children inherit the limit), mounts configfs for LIO and makes
// sure /dev/fuse exists.
func setupGuest() {
	b, err := os.ReadFile(filepath.Join(modulesDir, modulesList))
	if err != nil {
		setupErr = "the host's module list: " + err.Error()
		return
	}
	for _, ko := range strings.Fields(string(b)) {
		if _, err := os.Stat(filepath.Join("/sys/module", vmlab.ModuleName(ko))); err == nil {
			continue
		}
		if out, err := exec.Command("insmod", filepath.Join(modulesDir, ko)).CombinedOutput(); err != nil {
			setupErr = "insmod " + ko + ": " + err.Error() + ": " + string(out)
			return
		}
	}
	if out, err := exec.Command("rdma", "link", "add", "siw0", "type", "siw", "netdev", "eth0").CombinedOutput(); err != nil &&
		!bytes.Contains(out, []byte("exist")) {
		setupErr = "rdma link add siw0: " + string(out)
		return
	}
	inf := &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, inf); err != nil {
		setupErr = "lifting RLIMIT_MEMLOCK: " + err.Error()
		return
	}
	if _, err := os.Stat("/sys/kernel/config/target"); err != nil {
		if err := unix.Mount("configfs", "/sys/kernel/config", "configfs", 0, ""); err != nil && err != unix.EBUSY {
			setupErr = "mounting configfs: " + err.Error()
			return
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		unix.Mknod("/dev/fuse", unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229)))
	}
}

// prog runs a staged Debian program through the staged dynamic loader
// with the staged libraries.
func prog(ctx context.Context, name string, args ...string) *exec.Cmd {
	lib := filepath.Join(progsDir, "lib")
	abs, _ := filepath.Abs(lib)
	bin, _ := filepath.Abs(filepath.Join(progsDir, "bin", name))
	return exec.CommandContext(ctx, filepath.Join(abs, "ld-linux-x86-64.so.2"),
		append([]string{"--library-path", abs, bin}, args...)...)
}

// runProg runs a staged program to its end (at most limit) and returns
// its combined output.
func runProg(t *testing.T, limit time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := prog(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// logDmesg logs the kernel's messages of the test's time (LIO, isert and
// siw report there).
func logDmesg(t *testing.T) {
	out, _ := exec.Command("dmesg").CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("dmesg (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}
