package attach

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/mount"
)

// State is a device's state file, RUN-DIR/blockdevs/NAME.json.
type State struct {
	PID       int    `json:"pid"`
	Device    string `json:"device"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	Portal    string `json:"portal"`
	LUN       uint16 `json:"lun"`
	Size      int64  `json:"size"`
	BlockSize int    `json:"block_size"`
	ReadOnly  bool   `json:"read_only,omitempty"`
	Log       string `json:"log,omitempty"`
}

// StatePath is where the process serving dev keeps its State.
func StatePath(runDir, dev string) string {
	return filepath.Join(runDir, "blockdevs", filepath.Base(dev)+".json")
}

// LogPath is a fresh log file name for a daemon serving target's LUNs as
// devices of kind (nbd, ublk).
func LogPath(runDir, kind, target string) string {
	return filepath.Join(runDir, fmt.Sprintf("%s-%s-%d.log", kind, sanitize(target), time.Now().UnixNano()))
}

// sanitize makes a name usable in a file name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// ReadState reads a state file.
func ReadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// writeState replaces a state file (through a temporary file and a
// rename, so a reader never sees half of it).
func writeState(path string, st State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Recoverable returns the state of dev for serving it again
// (Config.Recover): an error when there is none, or when its process
// (other than this one) still serves it.
func Recoverable(runDir, dev string) (State, error) {
	st, err := ReadState(StatePath(runDir, dev))
	if err != nil {
		return st, fmt.Errorf("no state of it (%v; see --run-dir)", err)
	}
	if st.PID != os.Getpid() && mount.Alive(st.PID) {
		return st, fmt.Errorf("it is still served by pid %d", st.PID)
	}
	return st, nil
}

// Status is a device that a state file under RUN-DIR/blockdevs records.
type Status struct {
	State
	Gone string // why the device is not served: "" (it is) or "PROCESS GONE"
}

// List reads the state of the devices under runDir, in the order of their
// names; unreadable state files are left out.
func List(runDir string) []Status {
	paths, _ := filepath.Glob(filepath.Join(runDir, "blockdevs", "*.json"))
	var out []Status
	for _, p := range paths {
		if st, err := ReadState(p); err == nil {
			s := Status{State: st}
			if !mount.Alive(st.PID) {
				s.Gone = "PROCESS GONE"
			}
			out = append(out, s)
		}
	}
	return out
}

// PrintList prints the devices under runDir (as Print does) on w. It
// returns how many it found and whether each one is served.
func PrintList(runDir string, w io.Writer) (n int, served bool) {
	devs := List(runDir)
	served = true
	for _, st := range devs {
		if st.Gone != "" {
			served = false
		}
		st.Print(w)
	}
	return len(devs), served
}

// Print describes a listed device on one line: its LUN, target, portal,
// size, process and state.
func (st *Status) Print(w io.Writer) {
	state := "served"
	if st.Gone != "" {
		state = st.Gone
	}
	fmt.Fprintf(w, "%s: LUN %d of %s at %s, %s, pid %d, %s\n", st.Device, st.LUN, st.Target, st.Portal, hostdev.HumanSize(st.Size), st.PID, state)
}

// devicesOf lists the devices whose state names process pid.
func devicesOf(runDir string, pid int) []string {
	var out []string
	for _, st := range List(runDir) {
		if st.PID == pid {
			out = append(out, st.Device)
		}
	}
	return out
}
