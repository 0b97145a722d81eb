package mem

import (
	"errors"
	"testing"
)

func TestRegisterErrors(t *testing.T) {
	m := anon(t, 2*pageSize)
	pd := NewPD()
	tests := []struct {
		name   string
		pd     PD
		m      *Mapping
		off, n int
		acc    Access
		addr   Addressing
		want   error
	}{
		{"zero PD", PD{}, m, 0, 1, LocalWrite, ZeroBased, ErrPD},
		{"remote write without local write", pd, m, 0, 1, RemoteWrite, ZeroBased, ErrAccess},
		{"unknown access bit", pd, m, 0, 1, 1 << 7, ZeroBased, ErrAccess},
		{"unknown addressing", pd, m, 0, 1, LocalWrite, 7, ErrAccess},
		{"nil mapping", pd, nil, 0, 1, LocalWrite, ZeroBased, ErrClosed},
		{"zero length", pd, m, 0, 0, LocalWrite, ZeroBased, ErrSize},
		{"negative offset", pd, m, -1, 1, LocalWrite, ZeroBased, ErrRange},
		{"past the end", pd, m, pageSize, pageSize + 1, LocalWrite, ZeroBased, ErrRange},
		{"offset past the end", pd, m, 2*pageSize + 1, 1, LocalWrite, ZeroBased, ErrRange},
	}
	tab := NewTable(0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tab.Register(tt.pd, tt.m, tt.off, tt.n, tt.acc, tt.addr); !errors.Is(err, tt.want) {
				t.Errorf("Register: %v, want %v", err, tt.want)
			}
		})
	}
	if n := tab.Registered(); n != 0 {
		t.Errorf("%d MRs registered after failed registrations", n)
	}
	if err := m.Close(); err != nil {
		t.Errorf("failed registrations left the mapping busy: %v", err)
	}
}

func TestTableFull(t *testing.T) {
	tab := NewTable(2)
	m := anon(t, pageSize)
	pd := NewPD()
	a := register(t, tab, pd, m, 0, 1, 0, ZeroBased)
	b := register(t, tab, pd, m, 0, 1, 0, ZeroBased)
	if a.STag().Index() != 1 || b.STag().Index() != 2 {
		t.Errorf("indexes %d and %d, want 1 and 2 (0 is never used)", a.STag().Index(), b.STag().Index())
	}
	if _, err := tab.Register(pd, m, 0, 1, 0, ZeroBased); !errors.Is(err, ErrNoSTags) {
		t.Fatalf("third Register in a table of 2: %v, want ErrNoSTags", err)
	}
	deregister(t, tab, a)
	c := register(t, tab, pd, m, 0, 1, 0, ZeroBased)
	if c.STag().Index() != a.STag().Index() {
		t.Errorf("index %d, want the freed %d", c.STag().Index(), a.STag().Index())
	}
	deregister(t, tab, b, c, c) // twice in one call: once is enough
	deregister(t, tab, b)       // and again later
	if n := tab.Registered(); n != 0 {
		t.Errorf("%d MRs registered, want 0", n)
	}
	if _, err := NewTable(0).Register(pd, m, 0, 1, 0, ZeroBased); err != nil {
		t.Fatal(err)
	}
	if err := tab.Deregister(t.Context(), c, &MR{t: NewTable(1)}); !errors.Is(err, ErrForeign) {
		t.Errorf("Deregister of another table's MR: %v, want ErrForeign", err)
	}
}

func TestMRAccessors(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, 4*pageSize)
	pd := NewPD()
	for _, addr := range []Addressing{ZeroBased, VABased} {
		mr := register(t, tab, pd, m, pageSize, 2*pageSize, LocalWrite|RemoteRead, addr)
		want := uint64(0)
		if addr == VABased {
			want = uint64(uintptrOf(m.Bytes()[pageSize:]))
		}
		if mr.BaseTO() != want || mr.Len() != 2*pageSize || mr.PD() != pd ||
			mr.Access() != LocalWrite|RemoteRead || mr.Mapping() != m ||
			uintptrOf(mr.Bytes()) != uintptrOf(m.Bytes()[pageSize:]) || !mr.Valid() {
			t.Errorf("addressing %d: base %#x (want %#x), len %d, PD %v, access %v, valid %v",
				addr, mr.BaseTO(), want, mr.Len(), mr.PD(), mr.Access(), mr.Valid())
		}
		deregister(t, tab, mr)
		if mr.Valid() {
			t.Error("MR valid after Deregister")
		}
	}
}

func TestKeyRandomness(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pd := NewPD()
	r := tab.NewReader()
	defer r.Close()
	keys := map[uint8]int{}
	var prev *MR
	for i := range 2000 {
		mr := register(t, tab, pd, m, 0, 64, RemoteWrite|LocalWrite, ZeroBased)
		if prev != nil {
			if mr.STag().Index() != prev.STag().Index() {
				t.Fatalf("registration %d: index %d, want the freed %d", i, mr.STag().Index(), prev.STag().Index())
			}
			if mr.STag() == prev.STag() {
				t.Fatalf("registration %d: same STag %v as the registration before", i, mr.STag())
			}
			r.Enter()
			_, f := r.Check(prev.STag(), pd, 0, 1, RemoteWrite)
			r.Exit()
			if f != FaultInvalidSTag {
				t.Fatalf("stale %v: %v, want %v", prev.STag(), f, FaultInvalidSTag)
			}
		}
		keys[mr.STag().Key()]++
		deregister(t, tab, mr)
		prev = mr
	}
	// 2000 draws from 255 keys: all but a handful should show up.
	if len(keys) < 240 {
		t.Errorf("only %d distinct keys in 2000 registrations", len(keys))
	}
	other := NewTable(0)
	same := 0
	for range 64 {
		a := register(t, tab, pd, m, 0, 1, 0, ZeroBased)
		b := register(t, other, pd, m, 0, 1, 0, ZeroBased)
		if a.STag() == b.STag() {
			same++
		}
		deregister(t, tab, a)
		deregister(t, other, b)
	}
	if same > 8 {
		t.Errorf("two tables gave the same STag %d times in 64: keys are not seeded randomly", same)
	}
}

func TestStringers(t *testing.T) {
	tests := []struct{ got, want string }{
		{Access(0).String(), "LocalRead"},
		{(LocalWrite | RemoteWrite | RemoteInvalidate).String(), "LocalWrite|RemoteWrite|RemoteInvalidate"},
		{(RemoteRead | 1<<6).String(), "RemoteRead|invalid"},
		{FaultTOWrap.String(), "TO wrap"},
		{Fault(99).String(), "fault 99"},
		{MakeSTag(0x123456, 0x78).String(), "STag 0x12345678"},
		{PD{7}.String(), "PD 7"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
	if s := MakeSTag(MaxIndex, 0xff); s != 0xffffffff || s.Index() != MaxIndex || s.Key() != 0xff {
		t.Errorf("MakeSTag(MaxIndex, 0xff) = %v", s)
	}
}
