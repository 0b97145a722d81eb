package login

import (
	"reflect"
	"strings"
	"testing"
)

var disks = []TargetInfo{
	{Name: "iqn.1993-11.com.example:diskarray.sn.8675309", Portals: []Portal{{"10.1.0.45:3000", 1}, {"10.1.1.45:3000", 2}}},
	{Name: "iqn.1993-11.com.example:diskarray.sn.1234567", Portals: []Portal{{"[1080::8:800:200C:417A]:5003", 1}, {"computingcenter.example.com", 23}}},
	{Name: "iqn.1993-11.com.example:diskarray.sn.0000000"},
}

// TestAppendSendTargets checks the text of SendTargets responses
// (appendix C) for each kind of query.
func TestAppendSendTargets(t *testing.T) {
	rec := func(i int) string {
		s := "TargetName=" + disks[i].Name + "\x00"
		for _, p := range disks[i].Portals {
			s += "TargetAddress=" + p.Addr + "," + map[uint16]string{1: "1", 2: "2", 23: "23"}[p.TPGT] + "\x00"
		}
		return s
	}
	for _, c := range []struct {
		name    string
		query   string
		targets []TargetInfo
		want    string
		err     string
	}{
		{"All", "All", disks, rec(0) + rec(1) + rec(2), ""},
		{"session's target", "", disks[:1], rec(0), ""},
		{"by name", disks[1].Name, disks, rec(1), ""},
		{"unknown name", "iqn.1993-11.com.example:none", disks, "", ""},
		{"no targets", "All", nil, "", ""},
		{"bad query", "everything", disks, "", `SendTargets="everything"`},
		{"bad target name", "All", []TargetInfo{{Name: "disk"}}, "", `TargetName="disk"`},
		{"bad host", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"bad host:1", 1}}}}, "", `"bad host:1"`},
		{"comma in host", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"a,b", 1}}}}, "", `"a,b"`},
		{"unclosed IPv6", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"[::1:3260", 1}}}}, "", "closing bracket"},
		{"port 0", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"1.2.3.4:0", 1}}}}, "", "port"},
		{"port too big", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"1.2.3.4:65536", 1}}}}, "", "port"},
		{"empty port", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{"host:", 1}}}}, "", "port"},
		{"empty host", "All", []TargetInfo{{Name: disks[0].Name, Portals: []Portal{{":3260", 1}}}}, "", "host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendSendTargets(dst, c.query, c.targets)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || string(got) != "keep" {
					t.Fatalf("%q, %v; want an error about %s and dst unchanged", got, err, c.err)
				}
				return
			}
			if err != nil || string(got) != "keep"+c.want {
				t.Fatalf("%q, %v\nwant %q", got, err, c.want)
			}
		})
	}
}

// TestParseSendTargets checks the parsing of SendTargets responses with
// the examples of appendix C and malformed ones.
func TestParseSendTargets(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want []TargetInfo
		err  string
	}{
		{"empty", "", nil, ""},
		{"name only", "TargetName=iqn.1993-11.com.example:diskarray.sn.8675309\x00",
			[]TargetInfo{{Name: "iqn.1993-11.com.example:diskarray.sn.8675309"}}, ""},
		{"appendix C, two targets",
			"TargetName=iqn.1993-11.com.example:diskarray.sn.8675309\x00TargetAddress=10.1.0.45:3000,1\x00TargetAddress=10.1.1.45:3000,2\x00" +
				"TargetName=iqn.1993-11.com.example:diskarray.sn.1234567\x00TargetAddress=10.1.0.45:3000,1\x00TargetAddress=10.1.1.45:3000,2\x00\x00\x00",
			[]TargetInfo{
				{Name: "iqn.1993-11.com.example:diskarray.sn.8675309", Portals: []Portal{{"10.1.0.45:3000", 1}, {"10.1.1.45:3000", 2}}},
				{Name: "iqn.1993-11.com.example:diskarray.sn.1234567", Portals: []Portal{{"10.1.0.45:3000", 1}, {"10.1.1.45:3000", 2}}},
			}, ""},
		{"section 13.8 examples",
			"TargetName=iqn.1993-11.com.example:d\x00TargetAddress=[1080:0:0:0:8:800:200C:417A],65\x00" +
				"TargetAddress=[1080::8:800:200C:417A]:5003,1\x00TargetAddress=computingcenter.example.com,0x17\x00",
			[]TargetInfo{{Name: "iqn.1993-11.com.example:d", Portals: []Portal{
				{"[1080:0:0:0:8:800:200C:417A]", 65}, {"[1080::8:800:200C:417A]:5003", 1}, {"computingcenter.example.com", 23}}}}, ""},
		{"address first", "TargetAddress=10.0.0.1:3260,1\x00", nil, "before any TargetName"},
		{"no portal group tag", "TargetName=iqn.1993-11.com.example:d\x00TargetAddress=10.0.0.1:3260\x00", nil, "portal-group-tag"},
		{"tag too big", "TargetName=iqn.1993-11.com.example:d\x00TargetAddress=10.0.0.1:3260,65536\x00", nil, `"10.0.0.1:3260,65536"`},
		{"tag garbage", "TargetName=iqn.1993-11.com.example:d\x00TargetAddress=10.0.0.1:3260,one\x00", nil, "portal-group-tag"},
		{"bad address", "TargetName=iqn.1993-11.com.example:d\x00TargetAddress=10.0.0.1:32x60,1\x00", nil, "port"},
		{"other key", "TargetName=iqn.1993-11.com.example:d\x00TargetAlias=disk\x00", nil, `TargetAlias="disk"`},
		{"bad name", "TargetName=disk\x00", nil, `TargetName="disk"`},
		{"unterminated", "TargetName=iqn.1993-11.com.example:d", nil, "not terminated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSendTargets([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%v, %v; want an error about %s", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%+v, %v\nwant %+v", got, err, c.want)
			}
		})
	}
}

// TestSendTargetsRoundTrip checks that parsing what AppendSendTargets
// writes gives the targets back.
func TestSendTargetsRoundTrip(t *testing.T) {
	text, err := AppendSendTargets(nil, SendTargetsAll, disks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSendTargets(text)
	if err != nil || !reflect.DeepEqual(got, disks) {
		t.Fatalf("%+v, %v", got, err)
	}
}
