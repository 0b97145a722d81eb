package iscsi

import (
	"strings"
	"testing"
)

type kv struct{ k, v string }

func collect(seg []byte, max int) ([]kv, error) {
	var out []kv
	it := ParseText(seg)
	it.MaxValueLen = max
	for it.Next() {
		out = append(out, kv{string(it.Key()), string(it.Value())})
	}
	return out, it.Err()
}

func TestParseText(t *testing.T) {
	long := strings.Repeat("v", 256)
	tests := []struct {
		name string
		in   string
		max  int
		want []kv
		err  error
	}{
		{"empty", "", 0, nil, nil},
		{"padding only", "\x00\x00\x00", 0, nil, nil},
		{"login", "InitiatorName=iqn.2004-10.com.ubuntu:01:abc\x00SessionType=Normal\x00AuthMethod=None\x00\x00\x00", 0,
			[]kv{{"InitiatorName", "iqn.2004-10.com.ubuntu:01:abc"}, {"SessionType", "Normal"}, {"AuthMethod", "None"}}, nil},
		{"empty value", "TargetAlias=\x00", 0, []kv{{"TargetAlias", ""}}, nil},
		{"list value and = in value", "X-com.example.k=a,b=c\x00", 0, []kv{{"X-com.example.k", "a,b=c"}}, nil},
		{"iana key", "X#foo@bar_1+2=x\x00", 0, []kv{{"X#foo@bar_1+2", "x"}}, nil},
		{"key 63", strings.Repeat("k", 63) + "=1\x00", 0, []kv{{strings.Repeat("k", 63), "1"}}, nil},
		{"value 255", "K=" + long[:255] + "\x00", 0, []kv{{"K", long[:255]}}, nil},
		{"value 256 allowed by caller", "CHAP_C=" + long + "\x00", 1024, []kv{{"CHAP_C", long}}, nil},
		{"list of long simple values", "K=" + long[:255] + "," + long[:255] + "\x00", 0, []kv{{"K", long[:255] + "," + long[:255]}}, nil},
		{"no equals", "A=1\x00Bogus\x00", 0, []kv{{"A", "1"}}, ErrTextNoEquals},
		{"empty pair mid", "A=1\x00\x00B=2\x00", 0, []kv{{"A", "1"}}, ErrTextNoEquals},
		{"empty key", "=1\x00", 0, nil, ErrTextKeyEmpty},
		{"key 64", strings.Repeat("k", 64) + "=1\x00", 0, nil, ErrTextKeyTooLong},
		{"key char space", "Max Burst=1\x00", 0, nil, ErrTextKeyChar},
		{"key char utf8", "Kéy=1\x00", 0, nil, ErrTextKeyChar},
		{"value 256", "K=" + long + "\x00", 0, nil, ErrTextValueTooLong},
		{"unterminated", "A=1\x00B=2", 0, []kv{{"A", "1"}}, ErrTextUnterminated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := collect([]byte(tt.in), tt.max)
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestIterStopsAfterError(t *testing.T) {
	it := ParseText([]byte("bad\x00A=1\x00"))
	first := it.Next()
	second := it.Next() // called again after the error: still nothing
	if first || second || it.Err() != ErrTextNoEquals || it.Key() != nil {
		t.Fatal("iterator went on after an error")
	}
}

func TestAppendText(t *testing.T) {
	var seg []byte
	var err error
	for _, p := range []kv{{"HeaderDigest", "None"}, {"MaxRecvDataSegmentLength", "262144"}, {"TargetAlias", ""}} {
		if seg, err = AppendText(seg, p.k, p.v); err != nil {
			t.Fatal(err)
		}
	}
	const want = "HeaderDigest=None\x00MaxRecvDataSegmentLength=262144\x00TargetAlias=\x00"
	if string(seg) != want {
		t.Fatalf("%q", seg)
	}
	n := len(seg)
	seg = PadText(seg)
	if len(seg)%4 != 0 || len(seg)-n >= 4 || string(seg[:n]) != want {
		t.Fatalf("padded %q", seg)
	}
	if len(PadText(seg)) != len(seg) {
		t.Fatal("PadText of aligned segment grew")
	}
	got, err := collect(seg, 0)
	if err != nil || len(got) != 3 || got[1] != (kv{"MaxRecvDataSegmentLength", "262144"}) {
		t.Fatalf("%q %v", got, err)
	}

	tests := []struct {
		k, v string
		max  int
		err  error
	}{
		{"", "x", 255, ErrTextKeyEmpty},
		{strings.Repeat("k", 64), "x", 255, ErrTextKeyTooLong},
		{"a=b", "x", 255, ErrTextKeyChar},
		{"K", "a\x00b", 255, ErrTextValueChar},
		{"K", strings.Repeat("v", 256), 255, ErrTextValueTooLong},
		{"K", strings.Repeat("v", 256), 300, nil},
	}
	for _, tt := range tests {
		dst := []byte("A=1\x00")
		out, err := AppendTextLarge(dst, tt.k, tt.v, tt.max)
		if err != tt.err {
			t.Errorf("%q=%.10q: %v, want %v", tt.k, tt.v, err, tt.err)
		}
		if err != nil && string(out) != "A=1\x00" {
			t.Errorf("dst changed on error: %q", out)
		}
	}
}
