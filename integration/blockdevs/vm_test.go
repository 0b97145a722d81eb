package blockdevs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// What the host puts in the shared directory (the guest side reads the
// same names).
const (
	guestBinary  = "blockdevs.test"
	initiatorBin = "ddpinitiator"
	e2fsDir      = "e2fs"    // bin/mke2fs, lib/*.so*, mke2fs.conf
	modulesDir   = "modules" // *.ko and modules.order
	modulesList  = "modules.order"
)

// guestModules are what mounting ext4 needs beyond the guest image.
var guestModules = []string{"ext4"}

// TestNBD boots the guest once and runs TestGuestNBD there.
func TestNBD(t *testing.T) { runGuest(t, "TestGuestNBD", "nbd") }

// TestUblk boots the guest once and runs TestGuestUblk there.
func TestUblk(t *testing.T) { runGuest(t, "TestGuestUblk", "ublk_drv") }

// runGuest builds what the guest needs, boots it with module loaded and
// runs the guest test named test, which must pass there.
func runGuest(t *testing.T, test, module string) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	build := exec.Command("go", "build", "-o", filepath.Join(dir, initiatorBin), "github.com/ddpstore/ddpstore/cmd/ddpinitiator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ddpinitiator for the guest: %v\n%s", err, out)
	}
	if err := copyE2fs(filepath.Join(dir, e2fsDir)); err != nil {
		t.Logf("no mke2fs for the guest (%v): it verifies the raw device only", err)
	}
	if err := copyModules(filepath.Join(dir, modulesDir)); err != nil {
		t.Logf("no ext4 module for the guest (%v): it verifies the raw device only", err)
	}
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "400", "-M", module, "--",
		"./"+guestBinary, "-test.v", "-test.count=1", "-test.timeout=6m", "-test.run", "^"+test+"$")
	t.Logf("guest output (%.1f s, boot included):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("guest test: %v (exit 124 is run-vm.sh's limit)", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+test)) {
		t.Fatalf("%s did not pass in the guest", test)
	}
}

// copyE2fs copies mke2fs, every library it loads and the dynamic loader
// into dst/bin and dst/lib, and its configuration; the host is Debian
// bookworm like the guest.
func copyE2fs(dst string) error {
	bin, err := exec.LookPath("mke2fs")
	if err != nil {
		bin = "/usr/sbin/mke2fs"
	}
	if _, err := os.Stat(bin); err != nil {
		return err
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return fmt.Errorf("ldd %s: %v", bin, err)
	}
	files := map[string]string{filepath.Join("bin", "mke2fs"): bin}
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	for _, line := range strings.Split(string(out), "\n") {
		if m := soRE.FindStringSubmatch(line); m != nil {
			name := m[1]
			if name == "" {
				name = filepath.Base(m[2])
			}
			files[filepath.Join("lib", name)] = m[2]
		}
	}
	if _, err := os.Stat("/etc/mke2fs.conf"); err == nil {
		files["mke2fs.conf"] = "/etc/mke2fs.conf"
	}
	for rel, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// copyModules copies guestModules with their dependencies, from the
// guest kernel's module tree that build-vm.sh extracted, into dst, and
// writes dst/modules.order in an order insmod accepts.
func copyModules(dst string) error {
	m, err := os.ReadFile(filepath.Join(vmlab.CacheDir(), "out", "manifest.txt"))
	if err != nil {
		return err
	}
	k := regexp.MustCompile(`(?m)^kernel:\s+linux-image-(\S+)`).FindSubmatch(m)
	if k == nil {
		return fmt.Errorf("no kernel line in the guest's manifest")
	}
	kabi := string(k[1])
	tree := filepath.Join(vmlab.CacheDir(), "work", "kernel-"+kabi, "lib", "modules", kabi)
	f, err := os.Open(filepath.Join(tree, "modules.dep"))
	if err != nil {
		return err
	}
	defer f.Close()
	deps := map[string][]string{}
	byName := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		name, _, _ := strings.Cut(filepath.Base(mod), ".ko")
		byName[strings.ReplaceAll(name, "-", "_")] = mod
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
	for _, name := range guestModules {
		mod, ok := byName[name]
		if !ok {
			return fmt.Errorf("the guest kernel has no %s module", name)
		}
		visit(mod)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var list strings.Builder
	for _, mod := range order {
		b, err := os.ReadFile(filepath.Join(tree, mod))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(mod)), b, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(&list, filepath.Base(mod))
	}
	return os.WriteFile(filepath.Join(dst, modulesList), []byte(list.String()), 0o644)
}
