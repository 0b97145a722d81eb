package mem

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func anon(t testing.TB, size int) *Mapping {
	t.Helper()
	m, err := Anonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func register(t testing.TB, tab *Table, pd PD, m *Mapping, off, n int, acc Access, addr Addressing) *MR {
	t.Helper()
	mr, err := tab.Register(pd, m, off, n, acc, addr)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return mr
}

func deregister(t testing.TB, tab *Table, mrs ...*MR) {
	t.Helper()
	if err := tab.Deregister(context.Background(), mrs...); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func parseRange(s string, lo, hi *uintptr) bool {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	x, err1 := strconv.ParseUint(a, 16, 64)
	y, err2 := strconv.ParseUint(b, 16, 64)
	*lo, *hi = uintptr(x), uintptr(y)
	return err1 == nil && err2 == nil
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(fds)
}

// loopDevice attaches a loop device to a zeroed file of n bytes, or skips the
// test where that is not allowed (not root, no loop devices, no losetup).
func loopDevice(t *testing.T, n int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	path := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(path, make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", path).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "--detach", dev).Run() })
	return dev
}
