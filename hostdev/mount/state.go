// Package mount runs the initiator host's mounts: a session's LUNs served
// as files of a FUSE filesystem (hostdev/lunfs) by a process of their own,
// the state files that let other processes find and stop it, and the loop
// devices attached to its files. It is what "ddpinitiator mount", "umount",
// "attach", "detach" and "status" do; the command keeps their flags and
// exit codes.
package mount

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FSType is how the kernel lists our mounts (go-fuse's "fuse." + Name).
const FSType = "fuse.ddpstore"

// Info describes a mount: written to its state file, and reported by a
// daemon child to the parent that waits for it.
type Info struct {
	PID        int      `json:"pid"`
	Mountpoint string   `json:"mountpoint"`
	Target     string   `json:"target"`
	Portal     string   `json:"portal"`          // the portal in use
	Paths      []string `json:"paths,omitempty"` // every portal the session may fail over to, Portal included
	// Groups are the LU's ALUA target port groups with their states, the
	// one of the path in use marked; none for a target without ALUA.
	Groups []remote.PortGroup `json:"port_groups,omitempty"`
	// RoundRobin is each path of a round-robin session (multipath:
	// round-robin): all of them carry commands.
	RoundRobin []initiator.PathInfo `json:"round_robin,omitempty"`
	Log        string               `json:"log,omitempty"`
	Files      []File               `json:"files"`
	Error      string               `json:"error,omitempty"`
	Loops      []LoopInfo           `json:"loops,omitempty"`
}

// File is one LUN's file in a mount.
type File struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	LUN       uint16 `json:"lun"`
	Size      int64  `json:"size"`
	BlockSize int    `json:"block_size"`
	ReadOnly  bool   `json:"read_only,omitempty"`
}

// LoopInfo is a loop device attached to a File.
type LoopInfo struct {
	Device   string `json:"device"`
	File     string `json:"file"`
	DirectIO bool   `json:"direct_io"`
}

// ID names a mount point's state and log files.
func ID(dir string) string {
	h := sha256.Sum256([]byte(dir))
	base := strings.Trim(strings.ReplaceAll(dir, "/", "-"), "-")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return base + "-" + hex.EncodeToString(h[:4])
}

// StatePath is where the mount on dir keeps its Info.
func StatePath(runDir, dir string) string {
	return filepath.Join(runDir, "mounts", ID(dir)+".json")
}

// LogPath is the default log of the daemon serving dir.
func LogPath(runDir, dir string) string {
	return filepath.Join(runDir, ID(dir)+".log")
}

func writeState(path string, info Info) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadState reads a state file.
func ReadState(path string) (Info, error) {
	var info Info
	b, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// Entry is a line of /proc/self/mountinfo.
type Entry struct {
	Dir, FSType, Source string
}

// Find returns the mount whose mount point is dir.
func Find(dir string) (Entry, bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := findIn(string(b), dir)
	return e, ok, nil
}

// findIn finds dir's mount in the text of a mountinfo file.
func findIn(mountinfo, dir string) (Entry, bool) {
	var found Entry
	ok := false
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(line)
		if len(f) < 7 || unescape(f[4]) != dir {
			continue
		}
		for i := 6; i+2 < len(f); i++ {
			if f[i] == "-" {
				found, ok = Entry{Dir: dir, FSType: f[i+1], Source: unescape(f[i+2])}, true // the last one is on top
				break
			}
		}
	}
	return found, ok
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Unmount unmounts one of our mounts and waits for its process to log out
// and exit. EBUSY is retried for up to busyFor: a released file's last
// FUSE RELEASE may still be on its way.
func Unmount(runDir, dir string, busyFor time.Duration) error {
	mi, ok, err := Find(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s is not mounted", dir)
	}
	if mi.FSType != FSType {
		return fmt.Errorf("%s is a %s mount, not one of ddpinitiator's", dir, mi.FSType)
	}
	deadline := time.Now().Add(busyFor)
	for {
		err = unix.Unmount(dir, 0)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%s is busy: close the files open on it, unmount what is mounted from it, and detach its loop devices (ddpinitiator detach /dev/loopN)", dir)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("unmounting %s needs root", dir)
	case err != nil:
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	info, err := ReadState(StatePath(runDir, dir))
	if err != nil {
		return nil // no state: nothing to wait for
	}
	return waitExit(info.PID, 30*time.Second)
}

// waitExit waits for process pid to exit (it logs out after the unmount).
func waitExit(pid int, timeout time.Duration) error {
	if pid <= 0 || pid == os.Getpid() {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for unix.Kill(pid, 0) == nil {
		if isZombie(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mount's process %d has not exited %v after the unmount", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Alive reports whether process pid runs (and has not exited unreaped).
func Alive(pid int) bool {
	return unix.Kill(pid, 0) == nil && !isZombie(pid)
}

// isZombie: an exited child not yet reaped still answers kill 0.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
