// Package testbin builds this module's programs for the tests that run
// them as processes (the startup tests of cmd/ddptarget and
// cmd/ddpinitiator, integration/daemon): each program once per test
// binary, with the race detector, into a temporary directory that Cleanup
// removes.
package testbin

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Program is one command of this module, by its directory under cmd/.
type Program struct {
	Name string
	once sync.Once
	path string
	err  error
}

var (
	mu   sync.Mutex
	dirs []string
)

// Path returns the program's binary, building it the first time.
func (p *Program) Path(t testing.TB) string {
	t.Helper()
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", p.Name+"-bin")
		if err != nil {
			p.err = err
			return
		}
		mu.Lock()
		dirs = append(dirs, dir)
		mu.Unlock()
		os.Chmod(dir, 0o755) // runnable by tests that drop root
		p.path = filepath.Join(dir, p.Name)
		out, err := exec.Command("go", "build", "-race", "-o", p.path, "github.com/ddpstore/ddpstore/cmd/"+p.Name).CombinedOutput()
		if err != nil {
			p.err = fmt.Errorf("go build %s: %v\n%s", p.Name, err, out)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// Main runs the tests and removes every program they built: a package's
// TestMain is testbin.Main(m).
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes every program built.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	dirs = nil
}

// FreeAddr returns a loopback address nobody listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
