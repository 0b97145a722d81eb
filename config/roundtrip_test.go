package config

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMarshalRoundTripGenerated builds random valid configurations, with
// strings full of what YAML treats specially, and checks that Marshal writes
// what ParseTarget reads back unchanged. It complements FuzzParseTarget,
// whose mutations rarely produce accepted configurations.
func TestMarshalRoundTripGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(7143, 5044))
	for i := range 300 {
		want := randomTarget(r)
		out, err := want.Marshal()
		if err != nil {
			t.Fatalf("#%d: Marshal: %v", i, err)
		}
		got, err := ParseTarget(fmt.Sprintf("generated-%d.yaml", i), out)
		if err != nil {
			t.Fatalf("#%d: Marshal output rejected: %v\n%s", i, err, out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("#%d: round trip changed the configuration:\nwant %#v\n got %#v\n%s", i, want, got, out)
		}
	}
}

// yamlHostile are runes that YAML gives meaning to, and a few that are just
// not ASCII.
var yamlHostile = []rune(" :#{}[],&*!|>'\"%@`-?~\\/.=+;ünï字ß€0123456789")

func randomText(r *rand.Rand, maxLen int) string {
	for {
		n := 1 + r.IntN(maxLen)
		var b strings.Builder
		for range n {
			if r.IntN(3) == 0 {
				b.WriteRune(rune('a' + r.IntN(26)))
			} else {
				b.WriteRune(yamlHostile[r.IntN(len(yamlHostile))])
			}
		}
		if s := b.String(); len(s) <= maxTextValue {
			return s
		}
	}
}

// randomWord returns one of the words YAML would read as something else.
func randomWord(r *rand.Rand) string {
	words := []string{"true", "no", "null", "~", "0x1F", "1e3", ".inf", "2026-11-01", "- x", "? y", "a: b", "#c", "*d", "&e", "!f", "'g'", "\"h\"", "|", ">", "1GiB", "---", "..."}
	return words[r.IntN(len(words))]
}

func randomSecret(r *rand.Rand, prefix string) string {
	s := prefix + randomText(r, 40)
	for len(s) < MinCHAPSecretLen {
		s += "x"
	}
	return s
}

func randomCHAP(r *rand.Rand, n int) *CHAP {
	c := &CHAP{User: randomWord(r) + randomText(r, 20), Secret: randomSecret(r, fmt.Sprintf("in%d-", n))}
	if r.IntN(2) == 0 {
		c.MutualUser = randomWord(r)
		c.MutualSecret = randomSecret(r, fmt.Sprintf("out%d-", n))
	}
	return c
}

func randomTarget(r *rand.Rand) *Target {
	t := &Target{Limits: Limits{MaxSessions: 1 + r.IntN(65535), QueueDepth: 1 + r.IntN(4096),
		MaxLoggingIn: 1 + r.IntN(65535), MaxLoggingInPerAddress: 1 + r.IntN(65535), LoginTimeout: time.Duration(1+r.IntN(3600)) * time.Second}}
	levels, formats := logLevels, logFormats
	t.Log = Log{Level: levels[r.IntN(len(levels))], Format: formats[r.IntN(len(formats))]}
	hosts := []string{"127.0.0.1", "", "[::1]", "localhost", "storage.example.com", "[fe80::1%eth0]", "10.0.0.1"}
	t.Control = Control{Socket: fmt.Sprintf("/run/t%d/%s.sock", r.IntN(100), randomWord(r))}
	t.State = State{Dir: fmt.Sprintf("/var/lib/t%d/%s", r.IntN(100), randomWord(r))}
	if r.IntN(2) == 0 {
		t.Metrics.Listen = fmt.Sprintf("%s:%d", hosts[r.IntN(len(hosts))], 9000+r.IntN(100)) // below the portals' ports
	}
	for i := range 1 + r.IntN(3) {
		p := Portal{
			Listen:    fmt.Sprintf("%s:%d", hosts[r.IntN(len(hosts))], 3260+i), // distinct ports: no overlaps
			Transport: transports[r.IntN(len(transports))],
			MPA:       DefaultMPA(),
		}
		if p.Transport == TransportTCP {
			p.MPA = MPA{Revision: 1 + r.IntN(2), Markers: r.IntN(2) == 0, CRC: r.IntN(2) == 0}
		}
		t.Portals = append(t.Portals, p)
	}
	names := []string{"iqn.2026-11.io.ddpstore:", "eui.", "naa."}
	for i := range 1 + r.IntN(3) {
		var td TargetDef
		switch kind := names[r.IntN(len(names))]; kind {
		case "eui.":
			td.Name = fmt.Sprintf("eui.%016x", r.Uint64())
		case "naa.":
			td.Name = fmt.Sprintf("naa.%016x%016x", r.Uint64(), r.Uint64())
		default:
			td.Name = fmt.Sprintf("%st%d:%s", kind, i, strings.Repeat("ab.c:d-9", 1+r.IntN(5)))
		}
		if r.IntN(2) == 0 {
			td.Alias = randomText(r, 60)
		}
		if r.IntN(2) == 0 {
			td.Alias = randomWord(r)
		}
		for j := range 1 + r.IntN(4) {
			l := LUN{ID: r.IntN(MaxLUNID + 1), ReadOnly: r.IntN(2) == 0}
			for _, other := range td.LUNs {
				if other.ID == l.ID {
					l.ID = (l.ID + 1 + j) % (MaxLUNID + 1)
				}
			}
			if r.IntN(2) == 0 {
				l.Memory = Size(1+r.Int64N(1<<30)) * BlockSize
			} else {
				l.Path = fmt.Sprintf("/t%d/l%d/%s", i, j, randomText(r, 30))
				if r.IntN(2) == 0 {
					l.Size = Size(1+r.Int64N(1<<40)) * BlockSize
				}
			}
			td.LUNs = append(td.LUNs, l)
		}
		for k := range r.IntN(3) {
			td.Initiators = append(td.Initiators, fmt.Sprintf("iqn.2026-11.io.ddpstore:host%d-%d", i, k))
		}
		if r.IntN(2) == 0 {
			td.CHAP = randomCHAP(r, i)
		}
		if r.IntN(2) == 0 {
			a := &ALUA{}
			for k := range 1 + r.IntN(3) {
				a.Groups = append(a.Groups, PortGroup{ID: 1 + k*(1+r.IntN(1000)), State: ALUAStates[r.IntN(len(ALUAStates))]})
			}
			a.Group = a.Groups[r.IntN(len(a.Groups))].ID
			td.ALUA = a
		}
		td.NoImmediateData = i%2 == 1 // not drawn: a draw would change every later one
		t.Targets = append(t.Targets, td)
	}
	if r.IntN(2) == 0 {
		t.DiscoveryCHAP = randomCHAP(r, 99)
	}
	return t
}
