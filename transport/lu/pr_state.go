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
	if f.Version != 1 {
		return fmt.Errorf("lu: persistent reservations in %s: version %d, not 1", path, f.Version)
	}
	switch {
	case f.Type != 0 && !validType(f.Type):
		return fmt.Errorf("lu: persistent reservations in %s: type %d is not a reservation type", path, f.Type)
	case f.Type != 0 && !allRegistrants(f.Type) && slices.IndexFunc(f.Registrations, func(r registration) bool { return r.Port == f.Holder }) < 0:
		return fmt.Errorf("lu: persistent reservations in %s: the holder %q is not registered", path, f.Holder)
	}
	for _, r := range f.Registrations {
		if r.Key == 0 || r.Port == "" {
			return fmt.Errorf("lu: persistent reservations in %s: a registration without a key or port", path)
		}
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
