// Package tgtpeer sets up and shuts down Linux's user-space SCSI target
// daemon (tgtd, Debian's tgt 1.0.85) for the tests that use it as a peer:
// integration/tgt (iSCSI/TCP on the host) and integration/peers (iSER in
// the vmlab guest). Each runs tgtd in the foreground its own way (the
// host's program, or the guest's staged copy through the staged dynamic
// loader) and reaches its control port with tgtadm; this package holds
// what they share: the backing file, the tgtadm commands that make a
// target of one LUN, and the shutdown tgtd needs.
package tgtpeer

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Adm runs tgtadm with args on the right tgtd (the caller adds its
// program and control port) and returns its combined output.
type Adm func(args ...string) (string, error)

// Target is one target of one LUN on a file.
type Target struct {
	LLD  string // tgtadm's driver: "iscsi" (TCP) or "iser"
	TID  int    // target id, 1 or more
	IQN  string // the target's name
	LUN  int    // the file's LUN; tgt's LUN 0 is always its controller
	File string // the backing file (NewImage)
	// Initiators are initiator names admitted besides every address
	// (tgtadm -I ALL). tgt 1.0.85's iSER login admits an initiator only
	// when both its address and its name are bound; its iSCSI/TCP login
	// takes either. Empty: names are not bound.
	Initiators []string
}

// NewImage makes path a sparse file of size octets.
func NewImage(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Create makes tg with adm: the target, its LUN and its ACLs. tgtd takes
// its control socket a moment after it starts (seconds under TCG), so the
// first command is retried for up to wait.
func Create(adm Adm, tg Target, wait time.Duration) error {
	tid := strconv.Itoa(tg.TID)
	steps := [][]string{
		{"--op", "new", "--mode", "target", "--tid", tid, "-T", tg.IQN},
		{"--op", "new", "--mode", "logicalunit", "--tid", tid, "--lun", strconv.Itoa(tg.LUN), "-b", tg.File},
		{"--op", "bind", "--mode", "target", "--tid", tid, "-I", "ALL"},
	}
	for _, name := range tg.Initiators {
		steps = append(steps, []string{"--op", "bind", "--mode", "target", "--tid", tid, "-Q", name})
	}
	for i, s := range steps {
		args := append([]string{"--lld", tg.LLD}, s...)
		out, err := adm(args...)
		for deadline := time.Now().Add(wait); i == 0 && err != nil && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			out, err = adm(args...)
		}
		if err != nil {
			return fmt.Errorf("tgtadm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out))
		}
	}
	return nil
}

// Stop shuts down a tgtd running in the foreground, which ignores
// SIGTERM, the way its service does: the target is deleted (--force: its
// sessions too), then the daemon (tgtadm --op delete --mode system, which
// tgtd refuses while a target exists). done is closed when tgtd has
// exited; if it has not after 10 s, kill is called and Stop waits for
// done. It reports whether tgtd had to be killed.
func Stop(adm Adm, lld string, tid int, done <-chan struct{}, kill func()) (killed bool) {
	select {
	case <-done:
		return false
	default:
	}
	adm("--lld", lld, "--op", "delete", "--force", "--mode", "target", "--tid", strconv.Itoa(tid))
	adm("--op", "delete", "--mode", "system")
	select {
	case <-done:
		return false
	case <-time.After(10 * time.Second):
		kill()
		<-done
		return true
	}
}
