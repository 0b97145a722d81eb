package mem

import (
	"testing"
)

func TestInvalidate(t *testing.T) {
	pd, other := NewPD(), NewPD()
	tests := []struct {
		name   string
		acc    Access // of the region
		remote bool
		pd     PD
		stag   func(*MR) STag
		want   Fault
	}{
		{"local", RemoteWrite | LocalWrite, false, pd, (*MR).STag, FaultNone},
		{"local needs no right", RemoteRead, false, pd, (*MR).STag, FaultNone},
		{"local, other PD", RemoteRead, false, other, (*MR).STag, FaultNotAssociated},
		{"local, wrong key", RemoteRead, false, pd, func(mr *MR) STag { return mr.STag() ^ 0x10 }, FaultInvalidSTag},
		{"remote", RemoteRead | RemoteInvalidate, true, pd, (*MR).STag, FaultNone},
		{"remote without the right", RemoteRead | LocalWrite | RemoteWrite, true, pd, (*MR).STag, FaultCannotInvalidate},
		{"remote, other PD", RemoteInvalidate, true, other, (*MR).STag, FaultNotAssociated},
		{"remote, other PD and no right", RemoteRead, true, other, (*MR).STag, FaultNotAssociated},
		{"remote, wrong key", RemoteInvalidate, true, pd, func(mr *MR) STag { return mr.STag() + 1 }, FaultInvalidSTag},
		{"unused index", RemoteInvalidate, true, pd, func(*MR) STag { return MakeSTag(200, 1) }, FaultInvalidSTag},
		{"index without a chunk", RemoteInvalidate, false, pd, func(*MR) STag { return MakeSTag(MaxIndex, 1) }, FaultInvalidSTag},
	}
	tab := NewTable(0)
	m := anon(t, pageSize)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mr := register(t, tab, pd, m, 0, 100, tt.acc, ZeroBased)
			defer deregister(t, tab, mr)
			inv := tab.Invalidate
			if tt.remote {
				inv = tab.RemoteInvalidate
			}
			if f := inv(tt.stag(mr), tt.pd); f != tt.want {
				t.Fatalf("invalidate: %v, want %v", f, tt.want)
			}
			if got := tab.CheckSTag(mr.STag(), pd, 0); (got == FaultNone) != (tt.want != FaultNone) || mr.Valid() != (got == FaultNone) {
				t.Errorf("after invalidation %v: check %v, valid %v", tt.want, got, mr.Valid())
			}
			if tt.want == FaultNone {
				if f := inv(tt.stag(mr), tt.pd); f != FaultInvalidSTag {
					t.Errorf("second invalidation: %v, want %v", f, FaultInvalidSTag)
				}
			}
		})
	}
	if n := tab.Registered(); n != 0 {
		t.Errorf("%d MRs still registered", n)
	}
}

// An invalidated MR keeps its index until it is deregistered.
func TestInvalidateKeepsIndex(t *testing.T) {
	tab := NewTable(1)
	m := anon(t, pageSize)
	pd := NewPD()
	mr := register(t, tab, pd, m, 0, 100, RemoteInvalidate, ZeroBased)
	if f := tab.RemoteInvalidate(mr.STag(), pd); f != FaultNone {
		t.Fatal(f)
	}
	if _, err := tab.Register(pd, m, 0, 100, 0, ZeroBased); err == nil {
		t.Fatal("an invalidated MR's index was reused before Deregister")
	}
	if tab.Registered() != 1 {
		t.Errorf("Registered %d, want 1", tab.Registered())
	}
	deregister(t, tab, mr)
	mr2 := register(t, tab, pd, m, 0, 100, 0, ZeroBased)
	if mr2.STag().Index() != mr.STag().Index() || mr2.STag() == mr.STag() {
		t.Errorf("re-registration %v after %v: want the same index with a new key", mr2.STag(), mr.STag())
	}
	deregister(t, tab, mr2)
}

// PD isolation: nothing of one PD is reachable or invalidatable through
// another.
func TestPDIsolation(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	pds := []PD{NewPD(), NewPD(), NewPD()}
	all := LocalWrite | RemoteRead | RemoteWrite | RemoteInvalidate
	var mrs []*MR
	for _, pd := range pds {
		mrs = append(mrs, register(t, tab, pd, m, 0, 100, all, ZeroBased))
	}
	r := tab.NewReader()
	defer r.Close()
	for i, mr := range mrs {
		for j, pd := range pds {
			want := FaultNotAssociated
			if i == j {
				want = FaultNone
			}
			r.Enter()
			_, f := r.Check(mr.STag(), pd, 0, 100, RemoteWrite)
			r.Exit()
			if f != want {
				t.Errorf("MR of PD %d checked by PD %d: %v, want %v", i, j, f, want)
			}
			if i != j {
				if f := tab.RemoteInvalidate(mr.STag(), pd); f != FaultNotAssociated {
					t.Errorf("MR of PD %d remotely invalidated by PD %d: %v", i, j, f)
				}
				if f := tab.Invalidate(mr.STag(), pd); f != FaultNotAssociated {
					t.Errorf("MR of PD %d invalidated by PD %d: %v", i, j, f)
				}
			}
		}
		if !mr.Valid() {
			t.Errorf("MR of PD %d invalidated through another PD", i)
		}
	}
	deregister(t, tab, mrs...)
}
