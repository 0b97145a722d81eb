package session

import (
	"slices"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

func conf() *config.Initiator {
	c := config.DefaultInitiator()
	c.InitiatorName = "iqn.2024-01.org.example:host"
	c.QueueDepth, c.Buffers = 64, 8*config.MiB
	c.RecoveryTimeout = 7 * time.Second
	c.NOP = config.NOP{Interval: 3 * time.Second, Timeout: 9 * time.Second}
	c.DiscoveryCHAP = &config.CHAP{User: "disc", Secret: "discoverysecret"}
	c.Targets = []config.RemoteTarget{
		{Name: "iqn.2024-01.org.example:a", Portals: []string{"10.0.0.1:3260"}, CHAP: &config.CHAP{User: "a", Secret: "targetasecret"}},
		{Name: "iqn.2024-01.org.example:b", Portals: []string{"10.0.0.2:3260", "10.0.0.3:3260"}, Transport: config.TransportSCTP},
	}
	return c
}

func TestConfigTarget(t *testing.T) {
	c := conf()
	got := Config(c, "iqn.2024-01.org.example:a", initiator.Config{}, nil)
	if got.InitiatorName != c.InitiatorName || got.TargetName != "iqn.2024-01.org.example:a" {
		t.Errorf("names %q, %q", got.InitiatorName, got.TargetName)
	}
	if got.QueueDepth != 64 || got.Buffers != 8<<20 {
		t.Errorf("queue depth %d, buffers %d: want the configuration's", got.QueueDepth, got.Buffers)
	}
	if got.RecoveryTimeout != 7*time.Second || got.NopInterval != 3*time.Second || got.NopTimeout != 9*time.Second {
		t.Errorf("recovery %v, NOP %v/%v", got.RecoveryTimeout, got.NopInterval, got.NopTimeout)
	}
	if got.CHAP == nil || got.CHAP.User != "a" {
		t.Errorf("CHAP %+v: want the target's", got.CHAP)
	}
	if got.Conn.MPA.NoCRC != !c.MPA.CRC || got.Conn.MPA.Markers != c.MPA.Markers || int(got.Conn.MPA.Revision) != c.MPA.Revision {
		t.Errorf("MPA %+v from %+v", got.Conn.MPA, c.MPA)
	}

	got = Config(c, "iqn.2024-01.org.example:a", initiator.Config{QueueDepth: 4, Buffers: 1 << 20}, &config.CHAP{User: "cli", Secret: "commandlinesecret"})
	if got.QueueDepth != 4 || got.Buffers != 1<<20 {
		t.Errorf("queue depth %d, buffers %d: want the caller's", got.QueueDepth, got.Buffers)
	}
	if got.CHAP == nil || got.CHAP.User != "cli" {
		t.Errorf("CHAP %+v: want the command line's", got.CHAP)
	}

	if got = Config(c, "iqn.2024-01.org.example:b", initiator.Config{}, nil); !slices.Equal(got.Alternates, c.Targets[1].Portals) {
		t.Errorf("alternates %v, want the target's portals %v", got.Alternates, c.Targets[1].Portals)
	}
	if got = Config(c, "iqn.2024-01.org.example:b", initiator.Config{}, nil); got.CHAP != nil || got.HeaderDigest || got.DataDigest {
		t.Errorf("a target without CHAP or digests gets %+v, digests %v %v", got.CHAP, got.HeaderDigest, got.DataDigest)
	}
	c.Targets = append(c.Targets, config.RemoteTarget{Name: "iqn.2024-01.org.example:c", Portals: []string{"10.0.0.4:3260"},
		Transport: config.TransportISCSITCP, HeaderDigest: true, DataDigest: true})
	if got = Config(c, "iqn.2024-01.org.example:c", initiator.Config{}, nil); !got.HeaderDigest || !got.DataDigest {
		t.Errorf("the configured digests are not offered: %v %v", got.HeaderDigest, got.DataDigest)
	}
	c.NOP.Interval = 0
	if got = Config(c, "iqn.2024-01.org.example:b", initiator.Config{}, nil); got.NopInterval >= 0 {
		t.Errorf("keepalive off: NOP interval %v, want negative", got.NopInterval)
	}
}

func TestConfigDiscovery(t *testing.T) {
	c := conf()
	got := Config(c, "", initiator.Config{}, nil)
	if got.TargetName != "" || got.RecoveryTimeout != 0 {
		t.Errorf("discovery: target %q, recovery %v", got.TargetName, got.RecoveryTimeout)
	}
	if got.CHAP == nil || got.CHAP.User != "disc" {
		t.Errorf("discovery CHAP %+v", got.CHAP)
	}
	c.DiscoveryCHAP = nil
	if got = Config(c, "", initiator.Config{}, nil); got.CHAP != nil {
		t.Errorf("no discovery CHAP configured, got %+v", got.CHAP)
	}
}

func TestNetwork(t *testing.T) {
	c := conf()
	for _, tc := range []struct{ portal, target, override, want string }{
		{"10.0.0.1:3260", "iqn.2024-01.org.example:a", "", "tcp"},
		{"10.0.0.9:3260", "iqn.2024-01.org.example:b", "", "sctp"},
		{"10.0.0.2:3260", "iqn.2024-01.org.example:b", "sctp-udp", "sctp-udp"},
		{"10.0.0.3:3260", "", "", "sctp"}, // discovery: the target listing the portal
		{"10.0.0.9:3260", "", "", "tcp"},
		{"10.0.0.9:3260", "iqn.2024-01.org.example:unknown", "", "tcp"},
	} {
		if got := Network(c, tc.portal, tc.target, tc.override); got != tc.want {
			t.Errorf("Network(%s, %q, %q) = %s, want %s", tc.portal, tc.target, tc.override, got, tc.want)
		}
	}
}

func TestTargetLUNs(t *testing.T) {
	c := conf()
	c.Targets[1].LUNs = []int{3, 0, 7}
	if got := TargetLUNs(c, "iqn.2024-01.org.example:b"); !slices.Equal(got, []uint16{3, 0, 7}) {
		t.Errorf("selected LUNs %v, want [3 0 7] in the configuration's order", got)
	}
	if got := TargetLUNs(c, "iqn.2024-01.org.example:a"); got != nil {
		t.Errorf("no selection: %v, want nil (every LUN)", got)
	}
	if got := TargetLUNs(c, "iqn.2024-01.org.example:unknown"); got != nil {
		t.Errorf("a target not configured: %v, want nil", got)
	}
}
