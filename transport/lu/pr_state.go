package lu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	log "github.com/sirupsen/logrus"
)

// InitiatorPort is the SCSI initiator port name of an iSCSI session (RFC
// 7143 4.2.7.2, SPC-4 7.6.4.6): the InitiatorName, ",i,0x" and the ISID in
// 12 hexadecimal digits. Task.Port takes it.
func InitiatorPort(initiatorName string, isid uint64) string {
	return fmt.Sprintf("%s,i,0x%012x", initiatorName, isid&(1<<48-1))
}

// prFile is the persistent reservation state as kept in an LU's state
// file when an initiator asked for it to persist through power loss
// (APTPL, SPC-4 5.13.5).
type prFile struct {
	Version       int            `json:"version"`
	Generation    uint32         `json:"generation"`
	Type          byte           `json:"type,omitempty"`
	Holder        string         `json:"holder,omitempty"`
	Registrations []registration `json:"registrations"`
	// APTPL is kept by a shared store only: a state file exists only
	// while APTPL is on.
	APTPL bool `json:"aptpl,omitempty"`
}

// check validates a state read back.
func (f *prFile) check() error {
	if f.Version != 1 {
		return fmt.Errorf("version %d, not 1", f.Version)
	}
	switch {
	case f.Type != 0 && !validType(f.Type):
		return fmt.Errorf("type %d is not a reservation type", f.Type)
	case f.Type != 0 && !allRegistrants(f.Type) && slices.IndexFunc(f.Registrations, func(r registration) bool { return r.Port == f.Holder }) < 0:
		return fmt.Errorf("the holder %q is not registered", f.Holder)
	}
	for _, r := range f.Registrations {
		if r.Key == 0 || r.Port == "" {
			return errors.New("a registration without a key or port")
		}
	}
	return nil
}

// SetPRStateFile names the file that keeps the LU's persistent
// reservations across restarts when an initiator registers with APTPL,
// and loads what it holds. It must be called before the LU serves
// commands. Without it, REGISTER with APTPL is refused and REPORT
// CAPABILITIES says PTPL_C 0.
func (l *LU) SetPRStateFile(path string) error {
	s := &l.pr
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lu: persistent reservations: %w", err)
	}
	var f prFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("lu: persistent reservations in %s: %v", path, err)
	}
	if err := f.check(); err != nil {
		return fmt.Errorf("lu: persistent reservations in %s: %v", path, err)
	}
	s.generation, s.typ, s.holder, s.regs, s.aptpl = f.Generation, f.Type, f.Holder, f.Registrations, true
	if allRegistrants(s.typ) {
		s.holder = ""
	}
	l.prActive.Store(len(s.regs) > 0)
	return nil
}

// snapshot copies the state, to roll back to when it cannot be kept.
func (s *prState) snapshot() prData {
	d := s.prData
	d.regs = slices.Clone(s.regs)
	return d
}

// restore goes back to a snapshot.
func (s *prState) restore(d prData) { s.prData = d }

// prCommit ends a PERSISTENT RESERVE OUT that changed the state (s.mu
// held): the state file is rewritten (or removed, once APTPL is off) before
// GOOD, so that what an initiator was told persists does. If the file
// cannot be written the change is undone and the command fails.
func (l *LU) prCommit(cmd *api.SCSICommand, before prData) api.SAMStat {
	s := &l.pr
	if s.path != "" && (s.aptpl || before.aptpl) {
		if err := s.save(); err != nil {
			log.WithField("lu", l.id).Errorf("lu: persistent reservations not kept: %v", err)
			s.restore(before)
			return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure)
		}
	}
	l.prActive.Store(len(s.regs) > 0)
	return api.SAMStatGood
}

// save writes the state to s.path atomically and durably (a new file,
// fsync, rename over the old, fsync of the directory), or removes the
// file when APTPL is off.
func (s *prState) save() error {
	if !s.aptpl {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return syncDir(filepath.Dir(s.path))
	}
	b, err := json.MarshalIndent(prFile{Version: 1, Generation: s.generation, Type: s.typ, Holder: s.holder, Registrations: s.regs}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(s.path)+".new*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SharedPR keeps an LU's persistent reservation state where every gateway
// exporting the LU's store sees it (for an RBD image: a small object in
// its pool, blockdev/rbd.Shared), so that a registration or reservation
// made through one gateway holds through all of them.
type SharedPR interface {
	// Load returns the state last stored and its version; nil and 0 when
	// none was.
	Load() (state []byte, version uint64, err error)
	// Store replaces the state if it is still at version (0: none yet)
	// and returns the new version, with ok false and nothing changed when
	// another gateway stored first. It returns once every other gateway's
	// Watch callback has run, or with an error saying they did not all
	// answer (the state is stored then).
	Store(state []byte, version uint64) (newVersion uint64, ok bool, err error)
	// Watch calls changed after every Store of another gateway; the Store
	// waits for it to return.
	Watch(changed func()) error
}

// SetSharedPR makes shared the home of the LU's persistent reservation
// state, loads what it holds and follows the other gateways' changes. It
// must be called before the LU serves commands, instead of
// SetPRStateFile: the state outlives every gateway's restart, as with
// APTPL.
func (l *LU) SetSharedPR(shared SharedPR) error {
	s := &l.pr
	s.mu.Lock()
	s.shared = shared
	err := l.prRefresh()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lu: persistent reservations: %w", err)
	}
	return shared.Watch(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := l.prRefresh(); err != nil {
			log.WithField("lu", l.id).Errorf("lu: persistent reservations changed by another gateway: %v", err)
		}
	})
}

// prRefresh loads the shared state if it is newer than the LU's (s.mu
// held); nothing without a shared store.
func (l *LU) prRefresh() error {
	s := &l.pr
	if s.shared == nil {
		return nil
	}
	b, v, err := s.shared.Load()
	if err != nil || v <= s.version {
		return err
	}
	d := prData{}
	if len(b) > 0 {
		if d, err = decodePR(b); err != nil {
			return err
		}
	}
	s.prData, s.version = d, v
	l.prActive.Store(len(s.regs) > 0)
	return nil
}

// prStoreShared commits a PERSISTENT RESERVE OUT that changed the state to
// the shared store (s.mu held on entry, released on return): commands go
// on seeing the state before it until the store takes the new one. stale
// reports that another gateway stored first and nothing was done.
func (l *LU) prStoreShared(cmd *api.SCSICommand, before prData) (stat api.SAMStat, stale bool) {
	s := &l.pr
	after := s.snapshot()
	s.restore(before)
	version := s.version
	s.mu.Unlock()
	b, err := encodePR(after)
	if err != nil {
		log.WithField("lu", l.id).Errorf("lu: persistent reservations: %v", err)
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure), false
	}
	v, ok, err := s.shared.Store(b, version)
	switch {
	case !ok && err != nil:
		log.WithField("lu", l.id).Errorf("lu: persistent reservations not kept: %v", err)
		return checkCondition(cmd, scsi.SenseHardwareError, scsi.ASCInternalTargetFailure), false
	case !ok:
		return api.SAMStat{}, true
	case err != nil:
		log.WithField("lu", l.id).Warnf("lu: persistent reservations kept, but: %v", err)
	}
	s.mu.Lock()
	if v > s.version {
		s.prData, s.version = after, v
		l.prActive.Store(len(s.regs) > 0)
	}
	s.mu.Unlock()
	return api.SAMStatGood, false
}

// encodePR and decodePR turn the state into the state file's JSON and back.
func encodePR(d prData) ([]byte, error) {
	return json.Marshal(prFile{Version: 1, Generation: d.generation, Type: d.typ, Holder: d.holder, Registrations: d.regs, APTPL: d.aptpl})
}

func decodePR(b []byte) (prData, error) {
	var f prFile
	if err := json.Unmarshal(b, &f); err != nil {
		return prData{}, err
	}
	if err := f.check(); err != nil {
		return prData{}, err
	}
	d := prData{generation: f.Generation, typ: f.Type, holder: f.Holder, regs: f.Registrations, aptpl: f.APTPL}
	if allRegistrants(d.typ) {
		d.holder = ""
	}
	return d, nil
}
