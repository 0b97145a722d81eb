package session

import (
	"bytes"
	"testing"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/transport/login"
)

func TestWithPort(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":            "10.0.0.1:3260",
		"10.0.0.1:860":        "10.0.0.1:860",
		"host.example":        "host.example:3260",
		"fe80::1":             "[fe80::1]:3260",
		"[fe80::1]:3261":      "[fe80::1]:3261",
		"host.example:iscsi":  "host.example:iscsi",
		"[2001:db8::5]:12345": "[2001:db8::5]:12345",
	} {
		if got := WithPort(in); got != want {
			t.Errorf("WithPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfiguredPortal(t *testing.T) {
	c := conf()
	for _, tc := range []struct{ target, want, err string }{
		{"iqn.2024-01.org.example:b", "10.0.0.2:3260", ""}, // the first one listed
		{"", "", "no PORTAL given and the configuration has 2 targets, name one: iqn.2024-01.org.example:a, iqn.2024-01.org.example:b"},
		{"iqn.2024-01.org.example:unknown", "", `no PORTAL given and no target "iqn.2024-01.org.example:unknown" in the configuration; it has iqn.2024-01.org.example:a, iqn.2024-01.org.example:b`},
	} {
		got, err := ConfiguredPortal(c, tc.target)
		if got != tc.want || tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
			t.Errorf("ConfiguredPortal(%q) = %q, %v; want %q, %q", tc.target, got, err, tc.want, tc.err)
		}
	}
	c.Targets = c.Targets[:1]
	if got, err := ConfiguredPortal(c, ""); got != "10.0.0.1:3260" || err != nil {
		t.Errorf("the only target's portal: %q, %v", got, err)
	}
}

func TestTargetName(t *testing.T) {
	c := conf()
	if got, err := TargetName(c, "iqn.x:given"); got != "iqn.x:given" || err != nil {
		t.Errorf("a given name: %q, %v", got, err)
	}
	if _, err := TargetName(c, ""); err == nil {
		t.Error("two targets and no name: no error")
	}
	c.Targets = c.Targets[1:]
	if got, err := TargetName(c, ""); got != "iqn.2024-01.org.example:b" || err != nil {
		t.Errorf("the only target: %q, %v", got, err)
	}
	if _, err := TargetName(&config.Initiator{}, ""); err == nil {
		t.Error("no targets and no name: no error")
	}
}

func TestPrintTargets(t *testing.T) {
	var b bytes.Buffer
	PrintTargets(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no targets printed %q", b.String())
	}
	PrintTargets(&b, []login.TargetInfo{
		{Name: "iqn.x:a", Portals: []login.Portal{{Addr: "10.0.0.1:3260", TPGT: 1}, {Addr: "[fe80::1]:3260", TPGT: 2}}},
		{Name: "iqn.x:b"},
	})
	if want := "iqn.x:a\n  10.0.0.1:3260,1\n  [fe80::1]:3260,2\niqn.x:b\n"; b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
}
