package cephtest

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCluster starts a cluster in a subtest, uses it as a client would
// (an image written and read back through the rbd command), and checks
// that the subtest's cleanup left none of its daemons running; it logs
// how long start and teardown took.
func TestCluster(t *testing.T) {
	var pids []int
	var dir string
	var up time.Duration
	var used time.Time
	begin := time.Now()
	t.Run("start", func(t *testing.T) {
		c := Start(t)
		up = time.Since(begin)
		pids, dir = c.PIDs(), c.Dir()
		if len(pids) != 2 {
			t.Fatalf("%d daemons, want a monitor and an OSD", len(pids))
		}
		for _, p := range []string{c.Conf(), c.Keyring()} {
			if !strings.HasPrefix(p, dir) {
				t.Errorf("%s is not under the cluster's directory %s", p, dir)
			}
		}
		if c.User() != "admin" || c.Pool() != "rbd" {
			t.Errorf("user %q pool %q", c.User(), c.Pool())
		}
		if out := c.Ceph(t, "osd", "pool", "get", c.Pool(), "size"); strings.TrimSpace(out) != "size: 1" {
			t.Errorf("pool size: %q", out)
		}

		c.CreateImage(t, "img", 8<<20)
		if info := c.RBD(t, "info", c.Pool()+"/img"); !strings.Contains(info, "size 8 MiB") {
			t.Errorf("rbd info: %s", info)
		}
		data := make([]byte, 5<<20)
		rand.Read(data)
		in, out := filepath.Join(t.TempDir(), "in"), filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c.RBD(t, "import", in, c.Pool()+"/data")
		c.RBD(t, "export", c.Pool()+"/data", out)
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("rbd export returned %d octets that differ from the %d imported", len(got), len(data))
		}
		if objs := c.Objects(t, c.Pool()); len(objs) < 2 {
			t.Errorf("pool holds %v, want the image's data objects", objs)
		}
		used = time.Now()
	})
	total := time.Since(begin)
	if pids == nil {
		return
	}
	t.Logf("start %v, teardown %v, start+use+teardown %v", up.Round(10*time.Millisecond),
		time.Since(used).Round(10*time.Millisecond), total.Round(10*time.Millisecond))
	for _, pid := range pids {
		if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && bytes.Contains(cmd, []byte(dir)) {
			t.Errorf("daemon %d still running after cleanup: %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		}
	}
}
