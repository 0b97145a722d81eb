package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/lunfs"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

// Config is what Serve mounts and how.
type Config struct {
	Dir     string // the mount point, absolute
	Target  string // the session's target and portal, for Info
	Portal  string
	RunDir  string   // where the state file goes
	LogFile string   // the daemon's log, for Info
	LUNs    []uint16 // the LUNs to serve; none: every one the target reports
	Slots   int      // I/Os in flight (the session's queue depth)

	MaxWrite   int // the largest FUSE write
	DirectIO   bool
	AllowOther bool
	Debug      bool
	IOURing    string // FUSE over io_uring: off (also when empty), auto or on (lunfs.Options.IOURing)
}

// slotSize holds a whole MaxWrite at any offset of 4 KiB blocks.
func (c *Config) slotSize() int { return c.MaxWrite + 8192 }

// Buffers is the registered memory the session needs: the slots, and
// 1 MiB for REPORT LUNS and the like.
func (c *Config) Buffers() int { return c.Slots*c.slotSize() + 1<<20 }

// CheckMountpoint refuses what cannot be mounted on.
func CheckMountpoint(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	if mi, ok, _ := Find(dir); ok && mi.FSType == FSType {
		return fmt.Errorf("%s is already a ddpinitiator mount (of %s)", dir, mi.Source)
	}
	if os.Geteuid() != 0 {
		return errors.New("mounting needs root (FUSE is mounted directly, without fusermount)")
	}
	return CheckFUSE()
}

// CheckFUSE says why FUSE cannot be mounted here, or nil. It opens the
// device, as the mount will: a /dev/fuse without the fuse module behind it
// (a static node, a container's /dev) passes a stat and fails only then.
func CheckFUSE() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("this kernel has no FUSE: %w (is the fuse module loaded?)", err)
	}
	f.Close()
	return nil
}

// Serve mounts the LUNs of s on c.Dir and serves them until the mount is
// unmounted, then logs out. Each value received on signals asks for an
// unmount; a busy mount stays up and says so in the log. Once mounted it
// records its state under c.RunDir and reports to ready; a nil ready (a
// process in the foreground) prints the mount on stdout instead. An error
// means nothing was mounted.
func Serve(ctx context.Context, s *initiator.Session, c Config, stdout io.Writer, signals <-chan os.Signal, ready *Reporter) error {
	slots, err := remote.NewSlots(s, c.Slots, c.slotSize())
	if err != nil {
		return err
	}
	defer slots.Close()
	disks, err := openDisks(ctx, s, c.Target, c.LUNs, slots)
	if err != nil {
		return err
	}
	fsys := lunfs.New(disks, c.Slots, lunfs.Options{DirectIO: c.DirectIO, MaxWrite: c.MaxWrite, AllowOther: c.AllowOther, Name: c.Target, Debug: c.Debug, IOURing: c.IOURing})
	srv, err := fsys.Mount(c.Dir)
	if err != nil {
		return fmt.Errorf("mount on %s: %v", c.Dir, err)
	}
	info := Info{PID: os.Getpid(), Mountpoint: c.Dir, Target: c.Target, Portal: s.Portal(), Log: c.LogFile}
	if ps := s.Portals(); len(ps) > 1 {
		info.Paths = ps
	}
	info.Groups = portGroups(ctx, s, disks)
	info.RoundRobin = s.Paths()
	for _, d := range disks {
		name := fmt.Sprintf("lun%d", d.LUN())
		info.Files = append(info.Files, File{Name: name, Path: filepath.Join(c.Dir, name), LUN: d.LUN(), Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly()})
	}
	state := StatePath(c.RunDir, c.Dir)
	if err := writeState(state, info); err != nil {
		log.Warnf("mount state: %v (umount will not wait for the logout)", err)
	}
	defer os.Remove(state)
	if ready == nil {
		PrintMounted(stdout, info)
	}
	ready.Report(info)
	if ready == nil { // a daemon child is not the unit's main process: its parent was
		if err := Notify(fmt.Sprintf("READY=1\nSTATUS=%s of %s mounted on %s", plural(len(info.Files), "LUN"), c.Target, c.Dir)); err != nil {
			log.Warnf("sd_notify: %v", err)
		}
	}

	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	ended := s.Done()
	paths := time.NewTicker(time.Second)
	defer paths.Stop()
	for {
		select {
		case <-signals:
			unmountOnSignal(srv, c.Dir)
			continue
		case <-paths.C:
			if rr := s.Paths(); rr != nil {
				// Round-robin: status shows which paths are up.
				if fmt.Sprint(rr) != fmt.Sprint(info.RoundRobin) {
					info.RoundRobin = rr
					if err := writeState(state, info); err != nil {
						log.Warnf("mount state: %v", err)
					}
				}
				continue
			}
			// After a failover, status shows the portal now in use.
			if p := s.Portal(); p != info.Portal {
				log.Warnf("%s now served through %s (was %s)", c.Dir, p, info.Portal)
				info.Portal = p
				info.Groups = portGroups(ctx, s, disks)
				if err := writeState(state, info); err != nil {
					log.Warnf("mount state: %v", err)
				}
			}
			continue
		case <-ended:
			ended = nil
			log.Errorf("the session ended: %v; I/O on %s fails until it is unmounted", s.Err(), c.Dir)
			continue
		case <-served:
		}
		break
	}
	log.Infof("unmounted %s", c.Dir)
	if ready == nil {
		Notify("STOPPING=1")
	}
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch err := s.Logout(lctx); {
	case errors.Is(err, initiator.ErrReconnecting):
		log.Infof("the target is unreachable: no logout")
	case err != nil && s.Err() == nil:
		log.Warnf("logout: %v", err)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// unmountOnSignal unmounts, or says why it cannot and serves on: a busy
// mount still has users whose data must not be cut off.
func unmountOnSignal(srv *lunfs.Server, dir string) {
	if err := srv.Unmount(); err != nil {
		log.Errorf("cannot unmount %s: %v: files are open on it or a loop device is attached (ddpinitiator detach); still serving", dir, err)
	}
}

// openDisks opens the LUNs of the target that selected names (all it
// reports when it names none).
func openDisks(ctx context.Context, s *initiator.Session, target string, selected []uint16, slots *remote.Slots) ([]*remote.Disk, error) {
	luns, err := remote.DiskLUNs(ctx, s)
	if err != nil {
		return nil, err
	}
	if luns, err = SelectLUNs(luns, selected, target); err != nil {
		return nil, err
	}
	var disks []*remote.Disk
	for _, n := range luns {
		d, err := remote.Open(ctx, s, n, slots)
		if err != nil {
			return nil, err
		}
		disks = append(disks, d)
	}
	return disks, nil
}

// SelectLUNs returns the selected LUNs, all of those reported when none
// is selected; a selected LUN that is not reported, or none at all, is an
// error.
func SelectLUNs(reported, selected []uint16, target string) ([]uint16, error) {
	if len(selected) > 0 {
		has := map[uint16]bool{}
		for _, n := range reported {
			has[n] = true
		}
		for _, n := range selected {
			if !has[n] {
				return nil, fmt.Errorf("the configuration selects LUN %d, which %s does not report", n, target)
			}
		}
		reported = selected
	}
	if len(reported) == 0 {
		return nil, fmt.Errorf("%s reports no LUNs", target)
	}
	return reported, nil
}

// PrintMounted describes a mount and its files.
func PrintMounted(w io.Writer, info Info) {
	fmt.Fprintf(w, "mounted %s at %s on %s:\n", info.Target, info.Portal, info.Mountpoint)
	for _, f := range info.Files {
		ro := ""
		if f.ReadOnly {
			ro = ", read-only"
		}
		fmt.Fprintf(w, "  %s  %s (%d-octet blocks%s)\n", f.Path, hostdev.HumanSize(f.Size), f.BlockSize, ro)
	}
}

// portGroups asks the first LUN for its ALUA port groups, for status; a
// failure is logged and leaves them out.
func portGroups(ctx context.Context, s *initiator.Session, disks []*remote.Disk) []remote.PortGroup {
	if len(disks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := remote.PortGroups(ctx, s, disks[0].LUN())
	if err != nil {
		log.Warnf("ALUA port groups of LUN %d: %v", disks[0].LUN(), err)
	}
	return g
}
