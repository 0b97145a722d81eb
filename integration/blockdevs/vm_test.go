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
	targetBin    = "ddptarget"
	e2fsDir      = "e2fs"    // bin/mke2fs, bin/e2fsck, lib/*.so*, mke2fs.conf
	fioDir       = "fio"     // bin/fio, lib/*.so*
	modulesDir   = "modules" // *.ko and modules.order
	modulesList  = "modules.order"
)

// guestModules are what mounting ext4 needs beyond the guest image.
var guestModules = []string{"ext4"}

// TestNBD boots the guest once and runs TestGuestNBD there.
func TestNBD(t *testing.T) { runGuest(t, "nbd", "TestGuestNBD") }

// TestUblk boots the guest once and runs TestGuestUblk there, then
// TestGuestProcess (both drivers: nbd.ko is loaded too), so that fio and
// its libraries come into the guest once.
func TestUblk(t *testing.T) { runGuest(t, "ublk_drv nbd", "TestGuestUblk", "TestGuestProcess") }

// runGuest builds what the guest needs, boots it with modules (a list
// run-vm.sh's -M takes) loaded and runs the guest tests named, which must
// pass there.
func runGuest(t *testing.T, modules string, tests ...string) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ddpstore/ddpstore/cmd/ddpinitiator", "github.com/ddpstore/ddpstore/cmd/ddptarget")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ddpinitiator and ddptarget for the guest: %v\n%s", err, out)
	}
	if err := copyE2fs(filepath.Join(dir, e2fsDir)); err != nil {
		t.Logf("no mke2fs for the guest (%v): it verifies the raw device only", err)
	}
	if err := copyFio(t, filepath.Join(dir, fioDir)); err != nil {
		t.Logf("no fio for the guest (%v): its fio verify runs skip", err)
	}
	if err := copyModules(filepath.Join(dir, modulesDir)); err != nil {
		t.Logf("no ext4 module for the guest (%v): it verifies the raw device only", err)
	}
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "900", "-M", modules, "--",
		"./"+guestBinary, "-test.v", "-test.count=1", "-test.timeout=14m", "-test.run", "^("+strings.Join(tests, "|")+")$")
	t.Logf("guest output (%.1f s, boot included):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("guest test: %v (exit 124 is run-vm.sh's limit)", err)
	}
	for _, test := range tests {
		if !bytes.Contains(out, []byte("--- PASS: "+test+" ")) {
			t.Errorf("%s did not pass in the guest", test)
		}
	}
}

// copyE2fs copies mke2fs and e2fsck with every library they load and
// the dynamic loader into dst/bin and dst/lib, and mke2fs's configuration;
// the host is Debian bookworm like the guest.
func copyE2fs(dst string) error {
	var bins []string
	for _, name := range []string{"mke2fs", "e2fsck"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			bin = "/usr/sbin/" + name
		}
		if _, err := os.Stat(bin); err != nil {
			return err
		}
		bins = append(bins, bin)
	}
	if err := copyProgram(dst, bins...); err != nil {
		return err
	}
	if _, err := os.Stat("/etc/mke2fs.conf"); err == nil {
		return linkOrCopy("/etc/mke2fs.conf", filepath.Join(dst, "mke2fs.conf"))
	}
	return nil
}

// copyFio brings Debian's fio, installed with apt-get when missing (as
// root, like scripts/peers.sh), into dst with its libraries. Debian builds
// fio with every engine linked in (rbd, gluster, nbd, rdma, pmem), so it
// loads about 60 libraries, 80 MiB: linked rather than copied where the
// file systems allow, and copied once into the guest's tmpfs there, since
// loading them over 9p takes half a minute per run.
func copyFio(t *testing.T, dst string) error {
	bin, err := exec.LookPath("fio")
	if err != nil && os.Geteuid() == 0 {
		t.Log("installing fio with apt-get")
		cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", "fio")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install fio: %v\n%s", err, out)
		}
		bin, err = exec.LookPath("fio")
	}
	if err != nil {
		return err
	}
	return copyProgram(dst, bin)
}

// copyProgram puts the programs bins into dst/bin, and every library ldd
// says they load, the dynamic loader included, into dst/lib, where the
// guest runs them as dst/lib/ld-linux-x86-64.so.2 --library-path dst/lib.
func copyProgram(dst string, bins ...string) error {
	files := map[string]string{}
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	for _, bin := range bins {
		files[filepath.Join("bin", filepath.Base(bin))] = bin
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			return fmt.Errorf("ldd %s: %v", bin, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if m := soRE.FindStringSubmatch(line); m != nil {
				name := m[1]
				if name == "" {
					name = filepath.Base(m[2])
				}
				files[filepath.Join("lib", name)] = m[2]
			}
		}
	}
	if _, ok := files[filepath.Join("lib", "ld-linux-x86-64.so.2")]; !ok {
		return fmt.Errorf("ldd named no ld-linux-x86-64.so.2 for %v", bins)
	}
	for rel, src := range files {
		if err := linkOrCopy(src, filepath.Join(dst, rel)); err != nil {
			return err
		}
	}
	return nil
}

// linkOrCopy makes dst the file src names (after its symbolic links): a
// hard link where both are on one file system, else a copy.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	if os.Link(real, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
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
