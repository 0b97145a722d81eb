package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildPrograms builds ddptarget and ddpinitiator into dir: without the
// race detector, whose shadow memory would swamp the RSS being watched,
// unless SOAK_RACE=1.
func buildPrograms(t *testing.T, dir string) (target, initiator string) {
	t.Helper()
	args := []string{"build", "-o", dir + "/"}
	if os.Getenv("SOAK_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "github.com/ddpstore/ddpstore/cmd/ddptarget", "github.com/ddpstore/ddpstore/cmd/ddpinitiator")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return filepath.Join(dir, "ddptarget"), filepath.Join(dir, "ddpinitiator")
}

// need finds a program, installing its Debian package with apt-get when it
// is missing (the soak runs as root).
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(prog); err == nil {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "--no-install-recommends", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if _, err := install(); err != nil {
		if out, err := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); err != nil {
			t.Fatalf("apt-get update: %v\n%s", err, out)
		}
		if out, err := install(); err != nil {
			t.Fatalf("apt-get install %s: %v\n%s", pkg, err, out)
		}
	}
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s installed but not found: %v", pkg, err)
	}
	return p
}

// procStatus reads VmRSS, RssAnon + RssShmem, VmSize, Threads and State of a process, and counts its
// open file descriptors. ok is false once the process is gone or a zombie.
func procStatus(pid int) (s sample, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		switch k {
		case "State":
			if fields[0] == "Z" || fields[0] == "X" {
				return s, false
			}
		case "VmRSS", "RssAnon", "RssShmem", "VmSize":
			n, _ := strconv.ParseInt(fields[0], 10, 64)
			switch k {
			case "VmRSS":
				s.RSS = n << 10
			case "VmSize":
				s.VM = n << 10
			default:
				s.Anon += n << 10
			}
		case "Threads":
			s.Threads, _ = strconv.Atoi(fields[0])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, false
	}
	s.FDs = len(fds)
	s.Goroutines, s.Heap = -1, -1
	return s, true
}

var scrapeClient = &http.Client{Timeout: 3 * time.Second}

// scrape fetches addr's /metrics and returns the values of the series
// whose names (labels ignored, values summed) are asked for.
func scrape(addr string, names ...string) (map[string]float64, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			// labels may hold spaces: the value follows the closing brace
			if j := strings.LastIndexByte(line, '}'); j >= 0 {
				rest = strings.TrimSpace(line[j+1:])
			}
		}
		if !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			got[name] += v
		}
	}
	return got, sc.Err()
}

// scrapeSeries fetches addr's /metrics and returns every series (with its
// labels) of the metrics named.
func scrapeSeries(addr string, names ...string) (map[string]float64, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if strings.HasPrefix(line, n+"{") || strings.HasPrefix(line, n+" ") {
				i := strings.LastIndexByte(line, ' ')
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					got[line[:i]] += v
				}
			}
		}
	}
	return got, sc.Err()
}

// lockedFile is a log that several goroutines append to.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lockedFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

func (l *lockedFile) printf(format string, a ...any) { fmt.Fprintf(l, format, a...) }

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grepFile returns the lines of path that contain any of words.
func grepFile(path string, words ...string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return grepReader(f, words...)
}

func grepReader(r io.Reader, words ...string) []string {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, w := range words {
			if strings.Contains(sc.Text(), w) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}
