package lu

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/gostor/gotgt/pkg/api"
)

// prPort runs commands as one initiator port (and one I_T nexus).
type prPort struct {
	t    *testing.T
	tg   *Target
	task Task
}

func asPort(t *testing.T, tg *Target, name string, isid uint64, n Nexus) *prPort {
	p := &prPort{t: t, tg: tg}
	p.task.Port, p.task.Nexus = InitiatorPort(name, isid), n
	return p
}

func (p *prPort) run(cdb, out []byte) *Task {
	p.task.Status = 0xff
	p.tg.Execute(&p.task, lun(p.t, 0), cdb, out, make([]byte, 512))
	return &p.task
}

// want fails unless the command ends with status st (and, for CHECK
// CONDITION, the sense key and ASC).
func (p *prPort) want(st byte, key byte, asc uint16, cdb, out []byte) *Task {
	p.t.Helper()
	task := p.run(cdb, out)
	k, a := senseKey(task.Sense)
	if task.Status != st || st == api.SAM_STAT_CHECK_CONDITION && (k != key || a != asc) {
		p.t.Fatalf("%s: opcode %#x sa %#x: status %#x sense %x, want %#x %#x/%#04x", p.task.Port, cdb[0], cdb[1]&0x1f, task.Status, task.Sense, st, key, asc)
	}
	return task
}

func (p *prPort) ok(cdb, out []byte) *Task { p.t.Helper(); return p.want(0, 0, 0, cdb, out) }
func (p *prPort) conflict(cdb, out []byte) {
	p.t.Helper()
	p.want(statusReservationConflict, 0, 0, cdb, out)
}

func prIn(sa byte) []byte { return []byte{0x5e, sa, 0, 0, 0, 0, 0, 0x02, 0, 0} }

func prOut(sa, typ byte) []byte { return []byte{0x5f, sa, typ, 0, 0, 0, 0, 0, 24, 0} }

func prParams(key, sakey uint64, flags byte) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, key)
	binary.BigEndian.PutUint64(b[8:], sakey)
	b[20] = flags
	return b
}

func (p *prPort) register(old, key uint64) {
	p.t.Helper()
	p.ok(prOut(prOutRegister, 0), prParams(old, key, 0))
}
func (p *prPort) reserve(key uint64, typ byte) {
	p.t.Helper()
	p.ok(prOut(prOutReserve, typ), prParams(key, 0, 0))
}

// keys returns READ KEYS' generation and keys.
func (p *prPort) keys() (uint32, []uint64) {
	p.t.Helper()
	d := p.ok(prIn(prInReadKeys), nil).DataIn
	n := binary.BigEndian.Uint32(d[4:])
	var ks []uint64
	for i := 0; i < int(n); i += 8 {
		ks = append(ks, binary.BigEndian.Uint64(d[8+i:]))
	}
	return binary.BigEndian.Uint32(d), ks
}

// reservation returns READ RESERVATION's key and type (0, 0 for none).
func (p *prPort) reservation() (uint64, byte) {
	p.t.Helper()
	d := p.ok(prIn(prInReadReservation), nil).DataIn
	if binary.BigEndian.Uint32(d[4:]) == 0 {
		return 0, 0
	}
	if len(d) != 24 || d[21]>>4 != 0 {
		p.t.Fatalf("READ RESERVATION data %x", d)
	}
	return binary.BigEndian.Uint64(d[8:]), d[21] & 0x0f
}

func (p *prPort) canRead() bool { return p.run(cdb10(0x28, 0, 0, 1), nil).Status == api.SAM_STAT_GOOD }
func (p *prPort) canWrite() bool {
	return p.run(cdb10(0x2a, 0, 0, 1), make([]byte, 512)).Status == api.SAM_STAT_GOOD
}

// TestPRRegister: REGISTER and REGISTER AND IGNORE EXISTING KEY, as SPC-4
// 5.13.7 sets them out, and the generation they bump.
func TestPRRegister(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	a, b := asPort(t, tg, "iqn.a", 1, 1), asPort(t, tg, "iqn.b", 1, 2)
	if g, ks := a.keys(); g != 0 || len(ks) != 0 {
		t.Fatalf("fresh LU: generation %d keys %x", g, ks)
	}
	a.conflict(prOut(prOutRegister, 0), prParams(5, 0xa, 0)) // not registered, key not 0
	a.ok(prOut(prOutRegister, 0), prParams(0, 0, 0))         // registers nothing
	if g, ks := a.keys(); g != 0 || len(ks) != 0 {
		t.Fatalf("after no-op REGISTER: generation %d keys %x", g, ks)
	}
	a.register(0, 0xa)
	b.register(0, 0xb)
	if g, ks := a.keys(); g != 2 || len(ks) != 2 || ks[0] != 0xa || ks[1] != 0xb {
		t.Fatalf("generation %d keys %x, want 2 [a b]", g, ks)
	}
	a.conflict(prOut(prOutRegister, 0), prParams(0xb, 0xc, 0)) // wrong key
	a.register(0xa, 0xaa)                                      // change
	a.ok(prOut(prOutRegisterIgnore, 0), prParams(0x1234, 0xab, 0))
	// The same InitiatorName with another ISID is another port.
	a2 := asPort(t, tg, "iqn.a", 2, 3)
	a2.conflict(prOut(prOutRelease, prWriteExclusive), prParams(0xab, 0, 0))
	a2.ok(prOut(prOutRegisterIgnore, 0), prParams(0, 0xa2, 0))
	b.register(0xb, 0) // unregister
	if g, ks := a.keys(); g != 6 || len(ks) != 2 || ks[0] != 0xab || ks[1] != 0xa2 {
		t.Fatalf("generation %d keys %x, want 6 [ab a2]", g, ks)
	}
	// Parameter list errors.
	a.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x1a00, []byte{0x5f, 0, 0, 0, 0, 0, 0, 0, 20, 0}, prParams(0xab, 1, 0)[:20])
	a.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x2600, prOut(prOutRegister, 0), prParams(0xab, 1, 0x08)) // SPEC_I_PT
	a.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x2600, prOut(prOutRegister, 0), prParams(0xab, 1, 0x04)) // ALL_TG_PT
	a.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x2600, prOut(prOutRegister, 0), prParams(0xab, 1, 0x01)) // APTPL, no state file
	a.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x2400, prOut(prOutRegisterAndMove, 0), prParams(0xab, 1, 0))
	b.conflict(prOut(prOutReserve, prWriteExclusive), prParams(0xb, 0, 0)) // unregistered
}

// TestPRAccess: each reservation type lets the holder, another
// registrant and an unregistered port read and write as SPC-4 table 54
// says, and keeps INQUIRY, READ CAPACITY and the PR commands open.
func TestPRAccess(t *testing.T) {
	type access struct{ read, write bool }
	cases := []struct {
		typ                  byte
		registrant, stranger access
	}{
		{prWriteExclusive, access{true, false}, access{true, false}},
		{prExclusiveAccess, access{false, false}, access{false, false}},
		{prWriteExclusiveRegs, access{true, true}, access{true, false}},
		{prExclusiveAccessRegs, access{true, true}, access{false, false}},
		{prWriteExclusiveAll, access{true, true}, access{true, false}},
		{prExclusiveAccessAll, access{true, true}, access{false, false}},
	}
	for _, c := range cases {
		tg, _ := targetOfKinds(t, lbas*512, 0)
		h, r, s := asPort(t, tg, "iqn.h", 1, 1), asPort(t, tg, "iqn.r", 1, 2), asPort(t, tg, "iqn.s", 1, 3)
		h.register(0, 1)
		r.register(0, 2)
		h.reserve(1, c.typ)
		if !h.canRead() || !h.canWrite() {
			t.Errorf("type %d: the holder cannot read or write", c.typ)
		}
		for _, who := range []struct {
			p    *prPort
			want access
		}{{r, c.registrant}, {s, c.stranger}} {
			if got := (access{who.p.canRead(), who.p.canWrite()}); got != who.want {
				t.Errorf("type %d: %s reads/writes %v, want %v", c.typ, who.p.task.Port, got, who.want)
			}
			who.p.ok([]byte{0x12, 0, 0, 0, 36, 0}, nil)            // INQUIRY
			who.p.ok([]byte{0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil) // READ CAPACITY(10)
			who.p.ok([]byte{0x00, 0, 0, 0, 0, 0}, nil)             // TEST UNIT READY
			who.p.ok(prIn(prInReadKeys), nil)
		}
		// The reservation is the holder's, or everyone's of the AR types.
		key, typ := s.reservation()
		wantKey := uint64(1)
		if allRegistrants(c.typ) {
			wantKey = 0
		}
		if key != wantKey || typ != c.typ {
			t.Errorf("type %d: READ RESERVATION key %d type %d", c.typ, key, typ)
		}
		// Reserving again: the holder with the same type is GOOD, with
		// another type a conflict; a registrant that does not hold it
		// conflicts (AR types: it holds it).
		other := byte(prWriteExclusive)
		if c.typ == other {
			other = prExclusiveAccess
		}
		h.reserve(1, c.typ)
		h.conflict(prOut(prOutReserve, other), prParams(1, 0, 0))
		if allRegistrants(c.typ) {
			r.reserve(2, c.typ)
		} else {
			r.conflict(prOut(prOutReserve, c.typ), prParams(2, 0, 0))
		}
		// SPC-2 RESERVE and RELEASE conflict for everyone now.
		h.conflict(reserve6, nil)
		s.conflict(release10, nil)
		// Nexus loss and LU reset leave persistent reservations alone.
		tg.ITNexusLoss(1)
		tg.LogicalUnitReset(0)
		if _, typ := s.reservation(); typ != c.typ {
			t.Errorf("type %d: gone after nexus loss and LU reset", c.typ)
		}
		// RELEASE: a stranger's and a non-holder's change nothing; the
		// holder's with the wrong type is INVALID RELEASE.
		s.conflict(prOut(prOutRelease, c.typ), prParams(3, 0, 0))
		if !allRegistrants(c.typ) {
			r.ok(prOut(prOutRelease, c.typ), prParams(2, 0, 0))
			if _, typ := s.reservation(); typ != c.typ {
				t.Errorf("type %d: released by a registrant that did not hold it", c.typ)
			}
		}
		h.want(api.SAM_STAT_CHECK_CONDITION, 0x05, ascInvalidReleaseOfPR, prOut(prOutRelease, other), prParams(1, 0, 0))
		g, _ := h.keys()
		h.ok(prOut(prOutRelease, c.typ), prParams(1, 0, 0))
		if g2, _ := h.keys(); g2 != g {
			t.Errorf("type %d: RELEASE bumped the generation %d -> %d", c.typ, g, g2)
		}
		if _, typ := s.reservation(); typ != 0 || !s.canRead() || !s.canWrite() {
			t.Errorf("type %d: not released", c.typ)
		}
	}
}

// TestPRPreemptAndClear: PREEMPT takes a reservation from its holder and
// removes registrations by key; CLEAR removes everything.
func TestPRPreemptAndClear(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	a, b, c := asPort(t, tg, "iqn.a", 1, 1), asPort(t, tg, "iqn.b", 1, 2), asPort(t, tg, "iqn.c", 1, 3)
	a.register(0, 0xa)
	b.register(0, 0xb)
	c.register(0, 0xc)
	a.reserve(0xa, prExclusiveAccess)
	// Preempting a key no one has is a conflict; 0 without an AR
	// reservation is an invalid field.
	b.conflict(prOut(prOutPreempt, prExclusiveAccess), prParams(0xb, 0xd, 0))
	b.want(api.SAM_STAT_CHECK_CONDITION, 0x05, 0x2600, prOut(prOutPreempt, prExclusiveAccess), prParams(0xb, 0, 0))
	// b preempts the holder: a's registration goes, b holds WE.
	b.ok(prOut(prOutPreemptAndAbort, prWriteExclusive), prParams(0xb, 0xa, 0))
	if _, ks := c.keys(); len(ks) != 2 || ks[0] != 0xb || ks[1] != 0xc {
		t.Fatalf("keys after PREEMPT %x, want [b c]", ks)
	}
	if key, typ := c.reservation(); key != 0xb || typ != prWriteExclusive {
		t.Fatalf("reservation after PREEMPT: key %x type %d", key, typ)
	}
	if a.canWrite() || !a.canRead() {
		t.Fatal("the preempted port still writes, or cannot read under WE")
	}
	a.conflict(prOut(prOutRelease, prWriteExclusive), prParams(0xa, 0, 0)) // no longer registered
	// Preempting a registrant that does not hold: only its registration.
	b.ok(prOut(prOutPreempt, prWriteExclusive), prParams(0xb, 0xc, 0))
	if _, ks := b.keys(); len(ks) != 1 {
		t.Fatalf("keys %x, want [b]", ks)
	}
	// All registrants: PREEMPT with key 0 removes every other
	// registration and takes the reservation with the new type.
	a.register(0, 0xa)
	c.register(0, 0xc)
	b.ok(prOut(prOutRelease, prWriteExclusive), prParams(0xb, 0, 0))
	a.reserve(0xa, prExclusiveAccessAll)
	b.ok(prOut(prOutPreempt, prWriteExclusive), prParams(0xb, 0, 0))
	if _, ks := b.keys(); len(ks) != 1 || ks[0] != 0xb {
		t.Fatalf("keys after PREEMPT 0 of an AR reservation %x, want [b]", ks)
	}
	if key, typ := b.reservation(); key != 0xb || typ != prWriteExclusive {
		t.Fatalf("reservation: key %x type %d", key, typ)
	}
	// CLEAR.
	a.register(0, 0xa)
	a.conflict(prOut(prOutClear, 0), prParams(0xbad, 0, 0))
	g, _ := a.keys()
	a.ok(prOut(prOutClear, 0), prParams(0xa, 0, 0))
	if g2, ks := a.keys(); len(ks) != 0 || g2 != g+1 {
		t.Fatalf("after CLEAR: generation %d keys %x", g2, ks)
	}
	if _, typ := a.reservation(); typ != 0 || !c.canWrite() {
		t.Fatal("CLEAR left a reservation")
	}
	// SPC-2 RESERVE works again once no registration is left.
	c.ok(reserve6, nil)
	c.ok(release6, nil)
}

// TestPRUnregisterHolder: a holder that unregisters releases its
// reservation; the last registrant of an AR reservation ends it.
func TestPRUnregisterHolder(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	a, b := asPort(t, tg, "iqn.a", 1, 1), asPort(t, tg, "iqn.b", 1, 2)
	a.register(0, 1)
	a.reserve(1, prExclusiveAccess)
	a.register(1, 0)
	if _, typ := b.reservation(); typ != 0 || !b.canWrite() {
		t.Fatal("the reservation outlived its holder's registration")
	}
	a.register(0, 1)
	b.register(0, 2)
	a.reserve(1, prWriteExclusiveAll)
	a.register(1, 0)
	if _, typ := b.reservation(); typ != prWriteExclusiveAll {
		t.Fatal("an AR reservation ended with a registrant left")
	}
	b.register(2, 0)
	if _, typ := b.reservation(); typ != 0 {
		t.Fatal("an AR reservation outlived its last registrant")
	}
}

// TestPRReports: REPORT CAPABILITIES and READ FULL STATUS.
func TestPRReports(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	a, b := asPort(t, tg, "iqn.2026-11.test:a", 0x23d000000001, 1), asPort(t, tg, "iqn.b", 7, 2)
	d := a.ok(prIn(prInReportCaps), nil).DataIn
	if len(d) != 8 || binary.BigEndian.Uint16(d) != 8 || d[2] != 0 || d[3] != 0x80 || d[4] != 0xea || d[5] != 0x01 {
		t.Fatalf("REPORT CAPABILITIES %x", d)
	}
	a.register(0, 0x1111)
	b.register(0, 0x2222)
	a.reserve(0x1111, prWriteExclusiveRegs)
	d = b.ok(prIn(prInReadFullStatus), nil).DataIn
	if binary.BigEndian.Uint32(d) != 2 || int(binary.BigEndian.Uint32(d[4:])) != len(d)-8 {
		t.Fatalf("READ FULL STATUS header %x", d[:8])
	}
	var ports []string
	for p := d[8:]; len(p) > 0; {
		n := int(binary.BigEndian.Uint32(p[20:]))
		id := p[24 : 24+n]
		if id[0] != 0x45 || int(binary.BigEndian.Uint16(id[2:])) != n-4 || n%4 != 0 {
			t.Fatalf("TransportID %x", id)
		}
		port := string(bytes.TrimRight(id[4:], "\x00"))
		holder := p[12]&1 != 0
		if holder != (port == a.task.Port) || holder && p[13] != prWriteExclusiveRegs || binary.BigEndian.Uint16(p[18:]) != 1 {
			t.Errorf("descriptor of %s: %x", port, p[:24])
		}
		ports = append(ports, port)
		p = p[24+n:]
	}
	if len(ports) != 2 || ports[0] != "iqn.2026-11.test:a,i,0x23d000000001" || ports[1] != "iqn.b,i,0x000000000007" {
		t.Fatalf("ports %q", ports)
	}
	// The allocation length cuts the data.
	cdb := prIn(prInReadFullStatus)
	cdb[7], cdb[8] = 0, 10
	if d := b.ok(cdb, nil).DataIn; len(d) != 10 {
		t.Fatalf("ALLOCATION LENGTH 10 gave %d octets", len(d))
	}
}

// TestPRPersistThroughPowerLoss: with APTPL, registrations and the
// reservation are in the state file before GOOD and come back in an LU
// that loads it; without APTPL the file goes; a file that cannot be
// written fails the command and changes nothing.
func TestPRPersistThroughPowerLoss(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "pr", "lun0.json")
	store, err := blockdev.NewMemory(lbas * 512)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	open := func() *Target {
		l, err := New(1, store)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetPRStateFile(state); err != nil {
			t.Fatal(err)
		}
		tg, err := NewTarget("iqn.t", map[uint16]*LU{0: l})
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	tg := open()
	a, b := asPort(t, tg, "iqn.a", 1, 1), asPort(t, tg, "iqn.b", 1, 2)
	if d := a.ok(prIn(prInReportCaps), nil).DataIn; d[2]&1 != 1 || d[3]&1 != 0 {
		t.Fatalf("REPORT CAPABILITIES %x: want PTPL_C 1, PTPL_A 0", d)
	}
	a.ok(prOut(prOutRegister, 0), prParams(0, 0xa, 0x01))
	b.ok(prOut(prOutRegister, 0), prParams(0, 0xb, 0x01))
	a.reserve(0xa, prExclusiveAccess)
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("no state file after REGISTER with APTPL: %v", err)
	}

	// A restart: the same state in a new LU.
	tg = open()
	a, b = asPort(t, tg, "iqn.a", 1, 1), asPort(t, tg, "iqn.b", 1, 2)
	if g, ks := b.keys(); g != 2 || len(ks) != 2 {
		t.Fatalf("after restart: generation %d keys %x", g, ks)
	}
	if key, typ := b.reservation(); key != 0xa || typ != prExclusiveAccess || b.canRead() || !a.canWrite() {
		t.Fatalf("after restart: reservation key %x type %d", key, typ)
	}
	if d := a.ok(prIn(prInReportCaps), nil).DataIn; d[3]&1 != 1 {
		t.Fatalf("REPORT CAPABILITIES %x: want PTPL_A 1", d)
	}

	// A file that cannot be written: the command fails, nothing changes.
	os.Chmod(filepath.Dir(state), 0o500)
	if os.Getuid() != 0 { // root writes anyway
		g, _ := a.keys()
		a.want(api.SAM_STAT_CHECK_CONDITION, 0x04, 0x4400, prOut(prOutRegister, 0), prParams(0xa, 0xaa, 0x01))
		if g2, ks := a.keys(); g2 != g || ks[0] != 0xa {
			t.Fatalf("a failed REGISTER changed the state: generation %d keys %x", g2, ks)
		}
	}
	os.Chmod(filepath.Dir(state), 0o700)

	// APTPL off: the file goes, a restart starts empty.
	a.ok(prOut(prOutRegister, 0), prParams(0xa, 0xa, 0))
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("state file still there with APTPL off: %v", err)
	}
	tg = open()
	if _, ks := asPort(t, tg, "iqn.a", 1, 1).keys(); len(ks) != 0 {
		t.Fatalf("registrations %x came back without APTPL", ks)
	}

	// A damaged file is refused with its name.
	os.WriteFile(state, []byte(`{"version":1,"type":3,"holder":"x","registrations":[]}`), 0o600)
	l, _ := New(1, store)
	if err := l.SetPRStateFile(state); err == nil || !strings.Contains(err.Error(), state) {
		t.Fatalf("a holder without registration loaded: %v", err)
	}
}
