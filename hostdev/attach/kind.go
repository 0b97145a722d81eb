// Package attach serves a session's LUNs as kernel block devices, /dev/nbdN
// through the kernel's NBD client (hostdev/nbd) or /dev/ublkbN through ublk
// (hostdev/ublk), from a process of their own. That process keeps a state
// file per device in RUN-DIR/blockdevs; Detach finds it there, asks the
// kernel to take the device down and waits for the process to clean up,
// which logs out after its last device. A device whose process died can be
// served again (Config.Recover) or removed. It is what "ddpinitiator attach
// --nbd" and "--ublk", "detach" and "status" do for those devices; the
// command keeps their flags, daemon and exit codes. Loop devices over a FUSE
// mount's files are hostdev/mount's.
package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/ublk"
	log "github.com/sirupsen/logrus"
)

// A Kind is one of the kernel block device drivers attach can use.
type Kind struct {
	Name   string // nbd, ublk
	Flag   string // --nbd, --ublk
	Module string // the kernel module that provides it
	Node   string // what exists when it is loaded

	name *regexp.Regexp // of its devices
	// available says why the kernel cannot serve the kind, or nil.
	available func() error
	// attach exposes a LUN; recover serves dev, whose process died,
	// again; stop takes a device down from any process; remove takes
	// down one whose process died.
	attach  func(ctx context.Context, lun *nbd.LUN, inFlight int, backend string, l *log.Entry) (device, error)
	recover func(ctx context.Context, dev string, lun *nbd.LUN, inFlight int, backend string, l *log.Entry) (device, error)
	stop    func(dev string) error
	remove  func(dev string) error
}

// device is a LUN exposed as a block device by this process.
type device interface {
	Path() string
	Done() <-chan struct{}
	Err() error
	// Disconnect takes the device down and waits until it is.
	Disconnect(timeout time.Duration) error
}

type nbdDevice struct{ *nbd.Device }

func (d nbdDevice) Path() string { return d.Device.Path }

type ublkDevice struct{ *ublk.Device }

func (d ublkDevice) Path() string { return d.Device.Path }

var (
	// NBD devices, /dev/nbdN, served over a socketpair.
	NBD = &Kind{
		Name: "nbd", Flag: "--nbd", Module: "nbd", Node: "/dev/nbd0",
		name:      regexp.MustCompile(`^nbd([0-9]+)$`),
		available: nbd.Available,
		attach: func(ctx context.Context, lun *nbd.LUN, inFlight int, backend string, l *log.Entry) (device, error) {
			dev, err := nbd.Attach(ctx, lun, nbd.Options{Index: -1, InFlight: inFlight, Backend: backend, Log: l})
			if err != nil {
				return nil, err
			}
			return nbdDevice{dev}, nil
		},
		recover: func(ctx context.Context, dev string, lun *nbd.LUN, inFlight int, backend string, l *log.Entry) (device, error) {
			nd, err := nbd.Reattach(ctx, devIndex(dev), lun, nbd.Options{InFlight: inFlight, Backend: backend, Log: l})
			if err != nil {
				return nil, err
			}
			return nbdDevice{nd}, nil
		},
		stop:   func(dev string) error { return nbd.Disconnect(devIndex(dev)) },
		remove: func(dev string) error { return nbd.Disconnect(devIndex(dev)) },
	}
	// UBLK devices, /dev/ublkbN, with user recovery.
	UBLK = &Kind{
		Name: "ublk", Flag: "--ublk", Module: "ublk_drv", Node: ublk.ControlPath,
		name:      regexp.MustCompile(`^ublkb([0-9]+)$`),
		available: ublk.Available,
		attach: func(ctx context.Context, lun *nbd.LUN, inFlight int, _ string, l *log.Entry) (device, error) {
			dev, err := ublk.Attach(ctx, lun, ublk.Options{QueueDepth: inFlight, Recovery: true, Log: l})
			if err != nil {
				return nil, err
			}
			return ublkDevice{dev}, nil
		},
		recover: func(ctx context.Context, dev string, lun *nbd.LUN, inFlight int, _ string, l *log.Entry) (device, error) {
			ud, err := ublk.Recover(ctx, devIndex(dev), lun, ublk.Options{QueueDepth: inFlight, Log: l})
			if err != nil {
				return nil, err
			}
			return ublkDevice{ud}, nil
		},
		stop:   func(dev string) error { return ublk.Stop(devIndex(dev)) },
		remove: func(dev string) error { return ublk.Remove(devIndex(dev)) },
	}
)

// Kinds are the kinds attach can use.
var Kinds = []*Kind{NBD, UBLK}

// KindOf returns the kind of a device path that attach makes (/dev/nbdN,
// /dev/ublkbN), or nil.
func KindOf(dev string) *Kind {
	for _, k := range Kinds {
		if k.name.MatchString(filepath.Base(dev)) {
			return k
		}
	}
	return nil
}

// devIndex is the number at the end of a device's name.
func devIndex(dev string) int {
	name := filepath.Base(dev)
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(name[i:])
	return n
}

// Unavailable says why k cannot be used here, or nil: the kernel lacks its
// module, the module refuses, or this process is not root.
func (k *Kind) Unavailable() error {
	if _, err := os.Stat(k.Node); err != nil {
		return fmt.Errorf("this kernel has no %s (%s: %v); use the default loop device", k.Module, k.Node, err)
	}
	if k.available == nil {
		return fmt.Errorf("the %s backend is not implemented; use the default loop device", k.Module)
	}
	if err := k.available(); err != nil {
		return fmt.Errorf("%s: %v", k.Module, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s devices need root", k.Module)
	}
	return nil
}

// Select is the kind that "attach"'s flags ask for: nbd or ublk, or nil
// for loop devices over a mount. foreground goes with a kind. Its errors
// are *UsageErrors.
func Select(nbd, ublk, foreground bool) (*Kind, error) {
	switch {
	case nbd && ublk:
		return nil, usageErrorf("--nbd and --ublk exclude each other")
	case nbd:
		return NBD, nil
	case ublk:
		return UBLK, nil
	case foreground:
		return nil, usageErrorf("--foreground goes with --nbd or --ublk")
	}
	return nil, nil
}

// ForRecovery returns the state and the kind of dev for "attach --recover
// dev" (Config.Recover): an error when it has no state under runDir or its
// process still serves it (Recoverable); a *UsageError when dev is not an
// NBD or ublk device, or not of the kind that nbd or ublk (the flags, when
// given) ask for.
func ForRecovery(runDir, dev string, nbd, ublk bool) (State, *Kind, error) {
	st, err := Recoverable(runDir, dev)
	if err != nil {
		return st, nil, fmt.Errorf("--recover %s: %v", dev, err)
	}
	k := KindOf(dev)
	if k == nil {
		return st, nil, usageErrorf("--recover takes an NBD or ublk device (/dev/nbdN, /dev/ublkbN), not %s", dev)
	}
	if k == NBD && ublk || k == UBLK && nbd {
		return st, nil, usageErrorf("--recover %s is not a device of the kind asked for", dev)
	}
	return st, k, nil
}

// A UsageError says that a command line asks for what cannot be: flags
// that exclude each other, a device of the wrong kind.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}
