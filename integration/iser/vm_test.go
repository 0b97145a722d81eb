package iser

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

// What the host puts in the shared directory for the guest (guest_test.go
// reads the same names).
const (
	modulesDir  = "modules"       // *.ko, and modules.order: insmod in this order
	iscsiDir    = "open-iscsi"    // bin/iscsid, bin/iscsiadm, lib/*.so*
	guestBinary = "iser.test"     // this package's test binary
	modulesList = "modules.order" // in modulesDir
)

// guestModules are what the Linux initiator needs beyond the guest image's
// RDMA stack: the iSER initiator and the SCSI disk driver. Their
// dependencies come along per the kernel's modules.dep.
var guestModules = []string{"ib_iser", "sd_mod"}

// TestLinuxInitiator boots the vmlab guest (building it first when it is
// missing) and runs TestGuestLinuxInitiator inside it: our iSER target in
// the test process, Linux's ib_iser + open-iscsi logging in to it over siw.
func TestLinuxInitiator(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	copyModules(t, filepath.Join(dir, modulesDir))
	copyOpenISCSI(t, filepath.Join(dir, iscsiDir))
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "300", "--", "./"+guestBinary, "-test.v", "-test.run", "^TestGuest")
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("guest test: %v (exit 124 is run-vm.sh's 300 s limit)", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestGuestLinuxInitiator")) {
		t.Fatal("TestGuestLinuxInitiator did not pass in the guest")
	}
}

// guestKABI is the guest kernel's release, from build-vm.sh's manifest
// ("kernel:   linux-image-6.1.0-56-amd64 6.1.192-2 ...").
func guestKABI(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(vmlab.CacheDir(), "out", "manifest.txt"))
	if err != nil {
		t.Fatalf("the guest's kernel release: %v", err)
	}
	m := regexp.MustCompile(`(?m)^kernel:\s+linux-image-(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no kernel line in %s/out/manifest.txt", vmlab.CacheDir())
	}
	return string(m[1])
}

// guestModuleTree finds the guest kernel's full module tree: build-vm.sh
// extracts the kernel package under its work directory and copies only
// the modules the lab needs into the image, which has neither the SCSI
// disk driver nor iSCSI. The modules of the very kernel the guest boots
// are what we insmod there, so they are taken from that package: the work
// directory's copy, or the package itself, downloaded with apt-get.
func guestModuleTree(t *testing.T) string {
	kabi := guestKABI(t)
	tree := filepath.Join(vmlab.CacheDir(), "work", "kernel-"+kabi, "lib", "modules", kabi)
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

// copyModules copies guestModules and their dependencies into dst, and
// writes dst/modules.order: the module files in an order insmod accepts
// (every module after its dependencies).
func copyModules(t *testing.T, dst string) {
	tree := guestModuleTree(t)
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
		byName[moduleName(mod)] = mod
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
	for _, name := range guestModules {
		mod, ok := byName[name]
		if !ok {
			t.Fatalf("the guest kernel (%s) has no %s module: it cannot be an iSER initiator", tree, name)
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
	if err := os.WriteFile(filepath.Join(dst, modulesList), []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest modules (from %s): %s", tree, strings.Join(strings.Fields(list.String()), " "))
}

// moduleName is the module name of a modules.dep path, as /sys/module
// spells it.
func moduleName(path string) string {
	base := filepath.Base(path)
	base, _, _ = strings.Cut(base, ".ko")
	return strings.ReplaceAll(base, "-", "_")
}

// copyOpenISCSI copies iscsid and iscsiadm, with every shared library
// they load and the dynamic loader, into dst/bin and dst/lib. The host is
// Debian bookworm like the guest; open-iscsi is installed with apt-get
// when missing.
func copyOpenISCSI(t *testing.T, dst string) {
	bins := map[string]string{}
	for _, name := range []string{"iscsid", "iscsiadm"} {
		p, err := exec.LookPath(name)
		if err != nil {
			p = filepath.Join("/usr/sbin", name)
		}
		if _, err := os.Stat(p); err != nil {
			installOpenISCSI(t)
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("open-iscsi is installed but %s is missing", p)
			}
		}
		bins[name] = p
	}
	libs := map[string]string{} // soname -> host path
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	for _, p := range bins {
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			m := soRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := m[1]
			if name == "" {
				name = filepath.Base(m[2])
			}
			libs[name] = m[2]
		}
	}
	for dir, files := range map[string]map[string]string{"bin": bins, "lib": libs} {
		if err := os.MkdirAll(filepath.Join(dst, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, src := range files {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, dir, name), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := libs["ld-linux-x86-64.so.2"]; !ok {
		t.Fatalf("ldd named no ld-linux-x86-64.so.2 for %v", bins)
	}
	out, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", "open-iscsi").Output()
	t.Logf("open-iscsi %s: %d libraries", out, len(libs))
}

// installOpenISCSI installs Debian's open-iscsi (root only; others skip).
func installOpenISCSI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open-iscsi (iscsid, iscsiadm) is not installed and installing it needs root: apt-get install open-iscsi")
	}
	t.Log("installing open-iscsi with apt-get")
	cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", "open-iscsi")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get install open-iscsi: %v\n%s", err, out)
	}
}
