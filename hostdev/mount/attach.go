package mount

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/loop"
)

// AttachDir makes a fresh directory under RUN-DIR/attach to mount
// target's LUNs on, and checks that it can be mounted on.
func AttachDir(runDir, target string) (string, error) {
	base := filepath.Join(runDir, "attach")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, sanitize(target)+"-")
	if err != nil {
		return "", err
	}
	if err := CheckMountpoint(dir); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
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

// AttachLoops attaches a loop device to each of files, those of the mount
// on dir, with direct I/O where the kernel allows it; warn hears of each
// device the kernel refused direct I/O on. When one cannot be attached,
// those attached are detached, the mount is unmounted and dir removed.
func AttachLoops(runDir, dir string, files []File, warn func(string)) ([]*loop.Device, error) {
	var devs []*loop.Device
	for _, f := range files {
		d, err := loop.Attach(f.Path, loop.Options{DirectIO: true, ReadOnly: f.ReadOnly, BlockSize: f.BlockSize})
		if err != nil {
			for _, d := range devs {
				loop.Detach(d.Path)
				loop.WaitDetached(d.Path, 5*time.Second)
			}
			if err := Unmount(runDir, dir, 5*time.Second); err == nil {
				os.Remove(dir)
			}
			return nil, fmt.Errorf("loop device for %s: %v", f.Path, err)
		}
		if !d.DirectIO {
			warn(fmt.Sprintf("the kernel refused direct I/O on %s; it caches in the page cache", d.Path))
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// DetachLoop detaches dev, a loop device that AttachLoops made under
// runDir, as Detach does. dev that names no loop device is a *UsageError;
// one that is not attached is an error.
func DetachLoop(runDir, dev string, out io.Writer) error {
	file, err := loop.BackingFile(dev)
	if err != nil {
		return &UsageError{err}
	}
	if file == "" {
		return fmt.Errorf("%s is not attached", dev)
	}
	return Detach(runDir, dev, file, out)
}

// A UsageError says that a command line named something that is not what
// it should be (a loop device, say).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Detach detaches dev, a loop device over file, which AttachLoops made
// under runDir, and once no loop device uses that mount any more unmounts
// it (waiting for the logout) and removes its directory. It reports its
// steps on out.
func Detach(runDir, dev, file string, out io.Writer) error {
	dir := filepath.Dir(file)
	if filepath.Dir(dir) != filepath.Join(runDir, "attach") {
		return fmt.Errorf("%s is attached to %s, which ddpinitiator attach did not make (see --run-dir)", dev, file)
	}
	if err := loop.Detach(dev); err != nil {
		return err
	}
	if err := loop.WaitDetached(dev, 10*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(out, "detached %s\n", dev)
	if others := LoopsUnder(dir); len(others) > 0 {
		fmt.Fprintf(out, "%s stays mounted for %s\n", dir, strings.Join(others, ", "))
		return nil
	}
	if err := Unmount(runDir, dir, 10*time.Second); err != nil {
		return err
	}
	os.Remove(dir)
	fmt.Fprintf(out, "unmounted %s and logged out\n", dir)
	return nil
}

// LoopsUnder lists the loop devices whose backing file is in dir.
func LoopsUnder(dir string) []string {
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

// LoopsOf lists the loop devices over file.
func LoopsOf(file string) []string {
	var out []string
	for _, d := range LoopsUnder(filepath.Dir(file)) {
		if b, err := loop.BackingFile(d); err == nil && b == file {
			out = append(out, d)
		}
	}
	return out
}

// Status is a mount that a state file under RUN-DIR/mounts records.
type Status struct {
	Path string // of the state file
	Info Info
	Err  error  // reading the state file; the rest is then empty
	Gone string // why the mount is not served: "" (it is), "PROCESS GONE" or "NOT MOUNTED"
}

// List reads the state of the mounts under runDir.
func List(runDir string) []Status {
	paths, _ := filepath.Glob(filepath.Join(runDir, "mounts", "*.json"))
	var out []Status
	for _, p := range paths {
		st := Status{Path: p}
		st.Info, st.Err = ReadState(p)
		if st.Err == nil {
			if !Alive(st.Info.PID) {
				st.Gone = "PROCESS GONE"
			} else if mi, ok, _ := Find(st.Info.Mountpoint); !ok || mi.FSType != FSType {
				st.Gone = "NOT MOUNTED"
			}
		}
		out = append(out, st)
	}
	return out
}

// PrintList prints the mounts under runDir (as Print does) on w, and
// tells warn of each whose state file cannot be read, as "PATH: ERROR". It
// returns how many it found and whether each one is served.
func PrintList(runDir string, w io.Writer, warn func(string)) (n int, served bool) {
	mounts := List(runDir)
	served = true
	for _, st := range mounts {
		if st.Err != nil {
			warn(fmt.Sprintf("%s: %v", st.Path, st.Err))
			served = false
			continue
		}
		if st.Gone != "" {
			served = false
		}
		st.Print(w)
	}
	return len(mounts), served
}

// Print describes a listed mount: its mount point, target, portal,
// process and state, then each file with its size and loop devices.
func (st *Status) Print(w io.Writer) {
	state, info := "served", st.Info
	if st.Gone != "" {
		state = st.Gone
	}
	fmt.Fprintf(w, "%s: %s at %s, pid %d, %s\n", info.Mountpoint, info.Target, info.Portal, info.PID, state)
	if len(info.RoundRobin) > 0 {
		var ps []string
		for _, p := range info.RoundRobin {
			up := "down"
			if p.Up {
				up = "up"
			}
			ps = append(ps, fmt.Sprintf("%s (%s, %s)", p.Portal, up, p.State))
		}
		fmt.Fprintf(w, "  paths, round-robin: %s\n", strings.Join(ps, ", "))
	} else if len(info.Paths) > 1 {
		var ps []string
		for _, p := range info.Paths {
			if p == info.Portal {
				p += " (in use)"
			}
			ps = append(ps, p)
		}
		fmt.Fprintf(w, "  paths: %s\n", strings.Join(ps, ", "))
	}
	if len(info.Groups) > 0 {
		var gs []string
		for _, g := range info.Groups {
			s := fmt.Sprintf("%d %s", g.ID, g.State)
			if g.InUse {
				s += " (in use)"
			}
			gs = append(gs, s)
		}
		fmt.Fprintf(w, "  ALUA port groups: %s\n", strings.Join(gs, ", "))
	}
	for _, f := range info.Files {
		var loops strings.Builder
		for _, d := range LoopsOf(f.Path) {
			loops.WriteString(" -> " + d)
		}
		fmt.Fprintf(w, "  %s  %s%s\n", f.Path, hostdev.HumanSize(f.Size), loops.String())
	}
}
