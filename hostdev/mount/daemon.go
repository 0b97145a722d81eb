package mount

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// ReadyFD is the environment variable that tells a daemon child which
// descriptor to report its mount (or failure) on.
const ReadyFD = "DDPINITIATOR_READY_FD"

// Spawn starts this program with args as a mount daemon (its own session,
// stdin from /dev/null, output appended to logFile) and waits for it to
// report its mount or its failure on a pipe (see Reporter). args must make
// the child Serve with the Reporter of ReadyReporter.
func Spawn(runDir, logFile string, args []string) (Info, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return Info{}, err
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Info{}, err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return Info{}, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return Info{}, err
	}
	defer r.Close()
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), ReadyFD+"=3")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return Info{}, err
	}
	w.Close()
	var info Info
	dec := json.NewDecoder(bufio.NewReader(r))
	if err := dec.Decode(&info); err != nil {
		cmd.Wait()
		return Info{}, fmt.Errorf("the daemon exited before it mounted (%v); its log, %s, says:\n%s", cmd.ProcessState, logFile, tail(logFile, 10))
	}
	if info.Error != "" {
		cmd.Wait()
		return Info{}, errors.New(info.Error)
	}
	cmd.Process.Release()
	return info, nil
}

// tail returns the last n lines of a file, indented.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// A Reporter is how a daemon child tells the parent in Spawn that it
// mounted, or why it could not. A nil Reporter is a process in the
// foreground: Report does nothing.
type Reporter struct {
	f    *os.File
	done bool
}

// ReadyReporter returns the Reporter of a daemon child, or nil when this
// process was not started by Spawn.
func ReadyReporter() *Reporter {
	if os.Getenv(ReadyFD) == "" {
		return nil
	}
	return &Reporter{f: os.NewFile(3, "ready")}
}

// Report sends info (once).
func (r *Reporter) Report(info Info) {
	if r == nil || r.done || r.f == nil {
		return
	}
	r.done = true
	json.NewEncoder(r.f).Encode(info)
	r.f.Close()
}

// Fail tells of a failure to serve: on w as one line, "prefix: err", and
// to the parent in Spawn (once), which prints it as its own error.
func (r *Reporter) Fail(w io.Writer, prefix string, err error) {
	fmt.Fprintf(w, "%s: %v\n", prefix, err)
	r.Report(Info{Error: err.Error()})
}

// DefaultRunDir is where mounts keep their state and daemon logs unless
// told otherwise: /run/ddpinitiator for root, else under the user's
// runtime or temporary directory.
func DefaultRunDir() string {
	if os.Geteuid() == 0 {
		return "/run/ddpinitiator"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ddpinitiator")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ddpinitiator-%d", os.Getuid()))
}

// DropFlags returns the flags of a command line parsed by fs without
// those named by names, for a daemon child's command line: the flags the
// parent sets itself and those of the parent only. A dropped flag's
// separate value goes with it unless fs defines it as boolean.
func DropFlags(fs *flag.FlagSet, args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		t, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && slices.Contains(names, t) {
			if !hasValue && !isBool(fs, t) {
				i++ // its value
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func isBool(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
