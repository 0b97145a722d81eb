package loop_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/loop"
)

func needLoop(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	if err := loop.Available(); err != nil {
		t.Skip(err)
	}
}

func TestAttachDetach(t *testing.T) {
	needLoop(t)
	for _, o := range []loop.Options{{DirectIO: true, BlockSize: 4096}, {}, {ReadOnly: true}} {
		path := filepath.Join(t.TempDir(), "disk.img")
		if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := loop.Attach(path, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if b, err := loop.BackingFile(d.Path); err != nil || b != path {
			t.Errorf("backing file of %s: %q %v, want %q", d.Path, b, err, path)
		}
		if o.DirectIO && !d.DirectIO {
			t.Errorf("%s: direct I/O refused on a regular file", d.Path)
		}
		if o.ReadOnly {
			ro, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(d.Path), "ro"))
			if err != nil || strings.TrimSpace(string(ro)) != "1" {
				t.Errorf("%s: read-only attachment shows ro=%q (%v)", d.Path, ro, err)
			}
		} else {
			f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			p := bytes.Repeat([]byte("ddp!"), 1024)
			if _, err := f.WriteAt(p, 8192); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got[8192:8192+4096], p) {
				t.Errorf("%s: a write through the loop device did not reach the file", d.Path)
			}
		}
		if err := loop.Detach(d.Path); err != nil {
			t.Fatal(err)
		}
		if err := loop.WaitDetached(d.Path, 5*time.Second); err != nil {
			t.Error(err)
		}
		if err := loop.Detach(d.Path); err == nil || !strings.Contains(err.Error(), "not attached") {
			t.Errorf("second detach: %v", err)
		}
	}
}

func TestNotALoopDevice(t *testing.T) {
	if _, err := loop.BackingFile("/dev/null"); err == nil {
		t.Error("BackingFile(/dev/null) succeeded")
	}
}
