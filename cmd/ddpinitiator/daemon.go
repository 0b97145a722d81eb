package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fsType is how the kernel lists our mounts (go-fuse's "fuse." + Name).
const fsType = "fuse.ddpstore"

// spawn starts "ddpinitiator mount FLAGS PORTAL DIR" as a daemon (its own
// session, stdin from /dev/null, output to the log) and waits for it to
// report its mount or its failure on a pipe.
func spawn(flags []string, portal string, m *mountFlags, dir string) (mountInfo, error) {
	if err := os.MkdirAll(m.runDir, 0o755); err != nil {
		return mountInfo{}, err
	}
	if m.logFile == "" {
		m.logFile = filepath.Join(m.runDir, mountID(dir)+".log")
	}
	logf, err := os.OpenFile(m.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return mountInfo{}, err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return mountInfo{}, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return mountInfo{}, err
	}
	defer r.Close()
	args := append([]string{"mount"}, flags...)
	args = append(args, "--log-file", m.logFile, "--run-dir", m.runDir, portal, dir)
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), readyFD+"=3")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return mountInfo{}, err
	}
	w.Close()
	var info mountInfo
	dec := json.NewDecoder(bufio.NewReader(r))
	if err := dec.Decode(&info); err != nil {
		cmd.Wait()
		return mountInfo{}, fmt.Errorf("the daemon exited before it mounted (%v); its log, %s, says:\n%s", cmd.ProcessState, m.logFile, tail(m.logFile, 10))
	}
	if info.Error != "" {
		cmd.Wait()
		return mountInfo{}, errors.New(info.Error)
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

// mountID names a mount point's state and log files.
func mountID(dir string) string {
	h := sha256.Sum256([]byte(dir))
	base := strings.Trim(strings.ReplaceAll(dir, "/", "-"), "-")
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return base + "-" + hex.EncodeToString(h[:4])
}

func statePath(runDir, dir string) string {
	return filepath.Join(runDir, "mounts", mountID(dir)+".json")
}

func writeState(path string, info mountInfo) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readState(path string) (mountInfo, error) {
	var info mountInfo
	b, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// mountEntry is a line of /proc/self/mountinfo.
type mountEntry struct {
	dir, fstype, source string
}

// findMount returns the mount whose mount point is dir.
func findMount(dir string) (mountEntry, bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false, err
	}
	var found mountEntry
	ok := false
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(line)
		if len(f) < 7 || unescapeMount(f[4]) != dir {
			continue
		}
		for i := 6; i+2 < len(f); i++ {
			if f[i] == "-" {
				found, ok = mountEntry{dir: dir, fstype: f[i+1], source: unescapeMount(f[i+2])}, true // the last one is on top
				break
			}
		}
	}
	return found, ok, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
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

// unmount unmounts one of our mounts and waits for its process to log out
// and exit. EBUSY is retried for up to busyFor: a released file's last
// FUSE RELEASE may still be on its way.
func unmount(runDir, dir string, busyFor time.Duration) error {
	mi, ok, err := findMount(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s is not mounted", dir)
	}
	if mi.fstype != fsType {
		return fmt.Errorf("%s is a %s mount, not one of ddpinitiator's", dir, mi.fstype)
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
	state := statePath(runDir, dir)
	info, err := readState(state)
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
