package guesttools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Program is a host program a guest test runs, and the Debian package that
// installs it ("" when the caller installs it).
type Program struct {
	Name, Package string
}

// Copy puts progs, every shared library they load and the dynamic loader
// into dst/bin and dst/lib, on the host side of a guest test; the guest
// runs them with Tools{Root: dst}. The host is Debian bookworm like the
// guest. A missing program whose package is named is installed with
// apt-get (root only; others skip, saying so).
func Copy(t *testing.T, dst string, progs ...Program) {
	t.Helper()
	files := map[string]string{} // path under dst -> host path
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	var versions []string
	for _, p := range progs {
		path := find(p.Name)
		if path == "" && p.Package != "" {
			install(t, p.Package)
			path = find(p.Name)
		}
		if path == "" {
			t.Fatalf("%s is not on this host (package %q)", p.Name, p.Package)
		}
		files[filepath.Join("bin", p.Name)] = path
		out, err := exec.Command("ldd", path).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", path, err)
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
		if p.Package != "" {
			v, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", p.Package).Output()
			versions = append(versions, fmt.Sprintf("%s (%s %s)", p.Name, p.Package, v))
		}
	}
	if _, ok := files[filepath.Join("lib", "ld-linux-x86-64.so.2")]; !ok {
		t.Fatal("ldd named no ld-linux-x86-64.so.2 for the guest's programs")
	}
	for rel, src := range files {
		if err := linkOrCopy(src, filepath.Join(dst, rel)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("guest programs: %s; %d files with their libraries", strings.Join(versions, ", "), len(files))
}

// linkOrCopy makes dst the file src names (after its symbolic links): a
// hard link where both are on one file system (Debian's fio loads 80 MiB
// of libraries), else a copy.
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

// find returns the host's path of a program, "" when there is none.
func find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// install installs a Debian package (root only; others skip, saying so).
func install(t *testing.T, pkg string) {
	if os.Geteuid() != 0 {
		t.Skipf("%s is not installed and installing it needs root: apt-get install %s", pkg, pkg)
	}
	t.Logf("installing %s with apt-get", pkg)
	cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get install %s: %v\n%s", pkg, err, out)
	}
}
