package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/attach"
	"github.com/ddpstore/ddpstore/hostdev/loop"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/session"
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
		return failf(stderr, exitUsage, "ddpinitiator umount: %v", err)
	}
	if err := mount.Unmount(m.runDir, dir, 2*time.Second); err != nil {
		return failf(stderr, exitFailed, "ddpinitiator umount: %v", err)
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

"ddpinitiator detach /dev/loopN" undoes it.

With --nbd each LUN is instead a kernel NBD device, /dev/nbdN, served by a
process of its own over a socketpair (no TCP port): flush is SYNCHRONIZE
CACHE, discard is UNMAP. With --ublk it is a ublk device, /dev/ublkbN.
"ddpinitiator detach /dev/nbdN" (or /dev/ublkbN) takes it down; the
process logs out after its last device. On a kernel without the driver
(nbd.ko, ublk_drv.ko) they say so. --foreground serves the devices in
this process, logging to stderr, until they are detached or a signal
takes down those that are not in use.

When the process serving a device dies (kill -9, a crash), the kernel
holds the device's I/O: for 30 s with NBD, until detach with ublk (its
user recovery). "ddpinitiator attach --recover /dev/ublkbN" (or
/dev/nbdN) logs in again and serves the same device, so a filesystem
mounted on it carries on; the target and portal come from the device's
state in RUN-DIR. Detach of a device whose process died removes it.

`

func attachCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	var c common
	var m mountFlags
	var nbd, ublk, foreground bool
	var recoverDev string
	c.register(fs, true)
	m.register(fs, false)
	fs.BoolVar(&nbd, "nbd", false, "expose each LUN as a kernel NBD device (/dev/nbdN) instead of a loop device")
	fs.BoolVar(&ublk, "ublk", false, "expose each LUN as a ublk device (/dev/ublkbN) instead of a loop device")
	fs.BoolVar(&foreground, "foreground", false, "with --nbd or --ublk: serve in this process instead of a daemon")
	fs.StringVar(&recoverDev, "recover", "", "serve `DEVICE` (/dev/nbdN, /dev/ublkbN) again after its process died; its target, portal and LUN come from its state")
	if code, ok := parseFlags(fs, args, stdout, stderr, attachHelp); !ok {
		return code
	}
	if recoverDev != "" {
		st, k, err := attach.ForRecovery(m.runDir, recoverDev, nbd, ublk)
		if err != nil {
			return failf(stderr, exitCode(err, attach.IsUsage), "ddpinitiator attach: %v", err)
		}
		if fs.NArg() == 0 { // the target and portal of the device, unless given
			if c.target == "" {
				args = append(args, "--target", st.Target)
			}
			args = append(args, st.Portal)
		}
		nbd, ublk = k == attach.NBD, k == attach.UBLK
	}
	portal, _, code, ok := parse(fs, &c, args, stdout, stderr, attachHelp)
	if !ok {
		return code
	}
	k, err := attach.Select(nbd, ublk, foreground)
	if err != nil {
		return failf(stderr, exitUsage, "ddpinitiator attach: %v", err)
	}
	if k != nil {
		if err := k.Unavailable(); err != nil {
			return failf(stderr, exitUsage, "ddpinitiator attach: %s: %v", k.Flag, err)
		}
		if foreground {
			return serveBlock(ctx, k, &c, &m, portal, recoverDev, stdout, stderr)
		}
		return attachBlock(k, &c, &m, mount.DropFlags(fs, args[:len(args)-fs.NArg()], "nbd", "ublk", "log-file", "run-dir", "foreground"), portal, stdout, stderr)
	}
	if err := loop.Available(); err != nil {
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	// Before AttachDir makes RUN-DIR/attach: a failed start leaves nothing.
	if err := mount.CheckFUSE(); err != nil {
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	target, err := session.TargetName(c.cfg, c.target)
	if err != nil {
		return failf(stderr, exitUsage, "ddpinitiator attach: %v", err)
	}
	dir, err := mount.AttachDir(m.runDir, target)
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	info, err := spawn(mount.DropFlags(fs, args[:len(args)-fs.NArg()], "nbd", "ublk", "log-file", "run-dir"), portal, &m, dir)
	if err != nil {
		os.Remove(dir)
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	devs, err := mount.AttachLoops(m.runDir, dir, info.Files, func(msg string) { fmt.Fprintf(stderr, "ddpinitiator attach: %s\n", msg) })
	if err != nil {
		return failf(stderr, exitFailed, "ddpinitiator attach: %v", err)
	}
	for _, d := range devs {
		fmt.Fprintln(stdout, d.Path)
	}
	return exitOK
}

const detachHelp = `usage: ddpinitiator detach [flags] DEVICE

Detaches a loop device that "ddpinitiator attach" made and, once no loop
device uses that mount any more, unmounts it and logs out. DEVICE may
also be an NBD or ublk device of "attach --nbd" or "--ublk" (/dev/nbdN,
/dev/ublkbN): it is taken down, and its process logs out after its last
device. It refuses while the device is mounted.

`

func detachCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detach", flag.ContinueOnError)
	var m mountFlags
	m.register(fs, false)
	rest, code, ok := parsePlain(fs, args, stdout, stderr, detachHelp, "DEVICE")
	if !ok {
		return code
	}
	dev, detach := rest[0], mount.DetachLoop
	if attach.KindOf(dev) != nil {
		detach = attach.Detach
	}
	if err := detach(m.runDir, dev, stdout); err != nil {
		return failf(stderr, exitCode(err, mount.IsUsage), "ddpinitiator detach: %v", err)
	}
	return exitOK
}

// exitCode is the exit code of a failure: exitUsage when isUsage says the
// command line asked for what cannot be, else exitFailed.
func exitCode(err error, isUsage func(error) bool) int {
	if isUsage(err) {
		return exitUsage
	}
	return exitFailed
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
	nb, blocksServed := attach.PrintList(m.runDir, stdout)
	nm, mountsServed := mount.PrintList(m.runDir, stdout, func(msg string) { fmt.Fprintf(stderr, "ddpinitiator status: %s\n", msg) })
	switch {
	case nb+nm == 0:
		fmt.Fprintln(stdout, "no mounts")
	case !blocksServed || !mountsServed:
		return exitFailed
	}
	return exitOK
}
