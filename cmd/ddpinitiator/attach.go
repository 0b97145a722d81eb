package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/loop"
)

const umountHelp = `usage: ddpinitiator umount [flags] MOUNTPOINT

Unmounts a ddpinitiator mount and waits for its process to log out. It
refuses while files are open on the mount or loop devices are attached to
its files.

`

func umountCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("umount", flag.ContinueOnError)
	var m mountFlags
	m.register(fs, false)
	rest, code, ok := parsePlain(fs, args, stdout, stderr, umountHelp, "MOUNTPOINT")
	if !ok {
		return code
	}
	dir, err := filepath.Abs(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator umount: %v\n", err)
		return exitUsage
	}
	if err := unmount(m.runDir, dir, 2*time.Second); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator umount: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "unmounted %s\n", dir)
	return exitOK
}

const attachHelp = `usage: ddpinitiator attach [flags] [PORTAL]

Mounts --target's LUNs (as "ddpinitiator mount --daemon" does, on a
directory under RUN-DIR/attach) and attaches a loop device to each LUN's
file, with direct I/O where the kernel allows it. Prints the loop devices,
one per line in LUN order, for mkfs and mount:

  dev=$(ddpinitiator attach 10.0.0.5) && mkfs.ext4 "$dev" && mount "$dev" /mnt

"ddpinitiator detach /dev/loopN" undoes it. --nbd and --ublk would expose
the LUN through the kernel's NBD or ublk drivers instead; they say why they
are not available.

`

func attachCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	var c common
	var m mountFlags
	var nbd, ublk bool
	c.register(fs, true)
	m.register(fs, false)
	fs.BoolVar(&nbd, "nbd", false, "expose through an NBD device instead of a loop device (not available)")
	fs.BoolVar(&ublk, "ublk", false, "expose through a ublk device instead of a loop device (not available)")
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, attachHelp)
	if !ok {
		return code
	}
	switch {
	case nbd:
		fmt.Fprintf(stderr, "ddpinitiator attach: --nbd: %v\n", kernelFacility("nbd", "/dev/nbd0"))
		return exitUsage
	case ublk:
		fmt.Fprintf(stderr, "ddpinitiator attach: --ublk: %v\n", kernelFacility("ublk_drv", "/dev/ublk-control"))
		return exitUsage
	}
	if err := loop.Available(); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	target, err := c.targetName()
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitUsage
	}
	base := filepath.Join(m.runDir, "attach")
	if err := os.MkdirAll(base, 0o755); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	dir, err := os.MkdirTemp(base, sanitize(target)+"-")
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	if err := checkMountpoint(dir); err != nil {
		os.Remove(dir)
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	info, err := spawn(withoutFlags(args[:len(args)-fs.NArg()], "nbd", "ublk", "log-file", "run-dir"), portal, &m, dir)
	if err != nil {
		os.Remove(dir)
		fmt.Fprintf(stderr, "ddpinitiator attach: %v\n", err)
		return exitFailed
	}
	var devs []*loop.Device
	for _, f := range info.Files {
		d, err := loop.Attach(f.Path, loop.Options{DirectIO: true, ReadOnly: f.ReadOnly, BlockSize: f.BlockSize})
		if err != nil {
			fmt.Fprintf(stderr, "ddpinitiator attach: loop device for %s: %v\n", f.Path, err)
			for _, d := range devs {
				loop.Detach(d.Path)
				loop.WaitDetached(d.Path, 5*time.Second)
			}
			if err := unmount(m.runDir, dir, 5*time.Second); err == nil {
				os.Remove(dir)
			}
			return exitFailed
		}
		if !d.DirectIO {
			fmt.Fprintf(stderr, "ddpinitiator attach: the kernel refused direct I/O on %s; it caches in the page cache\n", d.Path)
		}
		devs = append(devs, d)
	}
	for _, d := range devs {
		fmt.Fprintln(stdout, d.Path)
	}
	return exitOK
}

// kernelFacility says why an optional kernel driver cannot be used.
func kernelFacility(module, node string) error {
	if _, err := os.Stat(node); err != nil {
		return fmt.Errorf("this kernel has no %s (%s: %v); use the default loop device", module, node, err)
	}
	return fmt.Errorf("the %s backend is not implemented; use the default loop device", module)
}

// sanitize makes a target name usable in a file name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// withoutFlags drops flags from a parsed command line: the ones spawn sets
// itself and those of the parent command only. A flag's separate value
// goes with it unless the flag is boolean.
func withoutFlags(args []string, names ...string) []string {
	boolean := map[string]bool{"daemon": true, "nbd": true, "ublk": true}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		t, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && slices.Contains(names, t) {
			if !hasValue && !boolean[t] {
				i++ // its value
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

const detachHelp = `usage: ddpinitiator detach [flags] /dev/loopN

Detaches a loop device that "ddpinitiator attach" made and, once no loop
device uses that mount any more, unmounts it and logs out. It refuses while
the loop device is mounted.

`

func detachCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detach", flag.ContinueOnError)
	var m mountFlags
	m.register(fs, false)
	rest, code, ok := parsePlain(fs, args, stdout, stderr, detachHelp, "/dev/loopN")
	if !ok {
		return code
	}
	dev := rest[0]
	file, err := loop.BackingFile(dev)
	if err != nil {
		fmt.Fprintf(stderr, "ddpinitiator detach: %v\n", err)
		return exitUsage
	}
	if file == "" {
		fmt.Fprintf(stderr, "ddpinitiator detach: %s is not attached\n", dev)
		return exitFailed
	}
	dir := filepath.Dir(file)
	if filepath.Dir(dir) != filepath.Join(m.runDir, "attach") {
		fmt.Fprintf(stderr, "ddpinitiator detach: %s is attached to %s, which ddpinitiator attach did not make (see --run-dir)\n", dev, file)
		return exitFailed
	}
	if err := loop.Detach(dev); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator detach: %v\n", err)
		return exitFailed
	}
	if err := loop.WaitDetached(dev, 10*time.Second); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator detach: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "detached %s\n", dev)
	if others := loopsUnder(dir); len(others) > 0 {
		fmt.Fprintf(stdout, "%s stays mounted for %s\n", dir, strings.Join(others, ", "))
		return exitOK
	}
	if err := unmount(m.runDir, dir, 10*time.Second); err != nil {
		fmt.Fprintf(stderr, "ddpinitiator detach: %v\n", err)
		return exitFailed
	}
	os.Remove(dir)
	fmt.Fprintf(stdout, "unmounted %s and logged out\n", dir)
	return exitOK
}

// loopsUnder lists the loop devices whose backing file is in dir.
func loopsUnder(dir string) []string {
	ents, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err == nil && filepath.Dir(strings.TrimSpace(string(b))) == dir {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(e))))
		}
	}
	return out
}

// parsePlain parses a command that takes no configuration and exactly the
// arguments named by want.
func parsePlain(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help string, want ...string) ([]string, int, bool) {
	if code, ok := parseFlags(fs, args, stdout, stderr, help); !ok {
		return nil, code, false
	}
	if fs.NArg() != len(want) {
		fmt.Fprintf(stderr, "ddpinitiator: want %s, got %d arguments\n\n", strings.Join(want, " "), fs.NArg())
		fs.Usage()
		return nil, exitUsage, false
	}
	return fs.Args(), exitOK, true
}

const statusHelp = `usage: ddpinitiator status [flags]

Lists the sessions this host's mounts and attachments hold: for each, its
mount point, target and portal, the process serving it, its LUN files and
the loop devices attached to them. Exit 0 when every listed mount is
served, 1 when one's process is gone (its mount then fails I/O: unmount it).

`

func statusCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var m mountFlags
	m.register(fs, false)
	if _, code, ok := parsePlain(fs, args, stdout, stderr, statusHelp); !ok {
		return code
	}
	states, _ := filepath.Glob(filepath.Join(m.runDir, "mounts", "*.json"))
	if len(states) == 0 {
		fmt.Fprintln(stdout, "no mounts")
		return exitOK
	}
	code := exitOK
	for _, p := range states {
		info, err := readState(p)
		if err != nil {
			fmt.Fprintf(stderr, "ddpinitiator status: %s: %v\n", p, err)
			code = exitFailed
			continue
		}
		state := "served"
		if err := syscall.Kill(info.PID, 0); err != nil || isZombie(info.PID) {
			state, code = "PROCESS GONE", exitFailed
		} else if mi, ok, _ := findMount(info.Mountpoint); !ok || mi.fstype != fsType {
			state, code = "NOT MOUNTED", exitFailed
		}
		fmt.Fprintf(stdout, "%s: %s at %s, pid %d, %s\n", info.Mountpoint, info.Target, info.Portal, info.PID, state)
		for _, f := range info.Files {
			loops := loopsOf(f.Path)
			fmt.Fprintf(stdout, "  %s  %s%s\n", f.Path, human(f.Size), strings.Join(loops, ""))
		}
	}
	return code
}

// loopsOf lists, as " -> /dev/loopN" strings, the loop devices over file.
func loopsOf(file string) []string {
	var out []string
	for _, d := range loopsUnder(filepath.Dir(file)) {
		if b, err := loop.BackingFile(d); err == nil && b == file {
			out = append(out, " -> "+d)
		}
	}
	return out
}
