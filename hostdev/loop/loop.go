// Package loop attaches a file to a Linux loop device and detaches it, with
// the loop ioctls (LOOP_CTL_GET_FREE, LOOP_CONFIGURE, LOOP_CLR_FD): the
// initiator uses it to turn a LUN's file into a block device that mkfs and
// mount take.
package loop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Options are an attachment's settings.
type Options struct {
	// DirectIO opens the file with O_DIRECT inside the loop driver, so the
	// loop device adds no page cache of its own (LO_FLAGS_DIRECT_IO).
	DirectIO bool
	// ReadOnly makes the loop device read-only.
	ReadOnly bool
	// BlockSize is the loop device's logical block size: the LUN's, so that
	// direct I/O stays aligned (0: the kernel's default, 512).
	BlockSize int
}

// Device is an attached loop device.
type Device struct {
	Path     string // /dev/loopN
	DirectIO bool   // whether direct I/O is on (the kernel may refuse it)
}

// Available says why loop devices cannot be used here, or nil. It opens
// /dev/loop-control as Attach will: a node without the loop driver behind
// it passes a stat and fails only then.
func Available() error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no loop devices: %w (is the loop module loaded?)", err)
	}
	ctl.Close()
	return nil
}

// Attach attaches file to a free loop device.
func Attach(file string, o Options) (*Device, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	flags := os.O_RDWR
	if o.ReadOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(file, flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		d, err := configure(n, f, file, o)
		if errors.Is(err, unix.EBUSY) && try < 10 {
			continue // another process took it first
		}
		return d, err
	}
}

// configure sets loop device n up over f.
func configure(n int, f *os.File, name string, o Options) (*Device, error) {
	path := fmt.Sprintf("/dev/loop%d", n)
	dev, err := openNode(path, n)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	cfg := unix.LoopConfig{Fd: uint32(f.Fd()), Size: uint32(o.BlockSize)}
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], name)
	if o.ReadOnly {
		cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
	}
	d := &Device{Path: path}
	if o.DirectIO {
		cfg.Info.Flags |= unix.LO_FLAGS_DIRECT_IO
		if err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg); err == nil {
			d.DirectIO = true
			return d, nil
		} else if errors.Is(err, unix.EBUSY) {
			return nil, err
		}
		cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO // the file refuses O_DIRECT: go without
	}
	if err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg); err != nil {
		return nil, fmt.Errorf("LOOP_CONFIGURE %s over %s: %w", path, name, err)
	}
	return d, nil
}

// openNode opens a loop device node, making it when /dev is not devtmpfs.
func openNode(path string, n int) (*os.File, error) {
	for range 50 {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
		if err := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
			time.Sleep(10 * time.Millisecond) // udev may be about to make it
		}
	}
	return nil, fmt.Errorf("%s: no device node", path)
}

// BackingFile is the file attached to the loop device at path, "" when none.
func BackingFile(path string) (string, error) {
	name := filepath.Base(path)
	if !strings.HasPrefix(name, "loop") {
		return "", fmt.Errorf("%s is not a loop device", path)
	}
	if _, err := strconv.Atoi(name[4:]); err != nil {
		return "", fmt.Errorf("%s is not a loop device", path)
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop/backing_file"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSuffix(string(b), "\n"), err
}

// Detach detaches the loop device at path. It refuses while the device is
// mounted or held (a filesystem's data would be cut off); the kernel
// finishes the detach when the last opener closes it.
func Detach(path string) error {
	name := filepath.Base(path)
	if holders, _ := os.ReadDir(filepath.Join("/sys/block", name, "holders")); len(holders) > 0 {
		return fmt.Errorf("%s is in use by %s", path, holders[0].Name())
	}
	if mp, err := mountedAt(path); err != nil {
		return err
	} else if mp != "" {
		return fmt.Errorf("%s is mounted on %s: unmount it first", path, mp)
	}
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil {
		if errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("%s is not attached", path)
		}
		return fmt.Errorf("LOOP_CLR_FD %s: %w", path, err)
	}
	return nil
}

// mountedAt returns where the block device at path is mounted, "" if
// nowhere, from /proc/self/mountinfo's major:minor.
func mountedAt(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[2] == want {
			return f[4], nil
		}
	}
	return "", nil
}

// WaitDetached waits until the loop device at path has no backing file,
// which the kernel drops when its last opener closes it.
func WaitDetached(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := BackingFile(path)
		if err != nil || b == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still holds %s after %v", path, b, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
