package attach

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/mount"
	"golang.org/x/sys/unix"
)

// Detach takes down dev, a device that Serve made with its state under
// runDir: refused while it is in use; otherwise the kernel is asked to
// remove it, and Detach waits for the serving process to clean up and,
// after its last device, to log out and exit. A device whose process died
// is removed, and I/O the kernel held for a recovery fails. It reports its
// steps on out.
func Detach(runDir, dev string, out io.Writer) error {
	k := KindOf(dev)
	if k == nil {
		return fmt.Errorf("%s is not an NBD or ublk device (/dev/nbdN, /dev/ublkbN)", dev)
	}
	state := StatePath(runDir, dev)
	st, err := ReadState(state)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s was not attached by ddpinitiator attach %s (no %s; see --run-dir)", dev, k.Flag, state)
		}
		return err
	}
	if err := inUse(dev); err != nil {
		return err
	}
	if !mount.Alive(st.PID) {
		// Nobody serves it: "attach --recover" could have; it goes
		// now, and I/O the kernel held for a recovery fails.
		if err := k.remove(dev); err != nil {
			return err
		}
		os.Remove(state)
		fmt.Fprintf(out, "detached %s (its process, pid %d, had died)\n", dev, st.PID)
		return nil
	}
	if err := k.stop(dev); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(state); errors.Is(err, os.ErrNotExist) {
			break
		}
		if !mount.Alive(st.PID) {
			os.Remove(state)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: its process (pid %d) has not taken it down after 30 s", dev, st.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(out, "detached %s\n", dev)
	if others := devicesOf(runDir, st.PID); len(others) > 0 {
		fmt.Fprintf(out, "pid %d still serves %s\n", st.PID, strings.Join(others, ", "))
		return nil
	}
	for mount.Alive(st.PID) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the process that served %s (pid %d) has not exited after 30 s", dev, st.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(out, "logged out of %s\n", st.Target)
	return nil
}

// inUse says whether a block device is mounted or held open exclusively:
// an exclusive open of it fails then.
func inUse(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%s is in use (mounted, or held open exclusively): unmount it first", dev)
	}
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}
