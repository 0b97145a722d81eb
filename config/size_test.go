package config

import (
	"flag"
	"math"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr string // substring of the error; "" for success
	}{
		{"0", 0, ""},
		{"512", 512, ""},
		{"1000", 1000, ""}, // a Size may be any octet count; LUNs check whole blocks
		{"0B", 0, ""},
		{"100B", 100, ""},
		{"1KiB", KiB, ""},
		{"4KiB", 4 * KiB, ""},
		{"256MiB", 256 * MiB, ""},
		{"1GiB", GiB, ""},
		{"1 GiB", GiB, ""},
		{"2TiB", 2 * TiB, ""},
		{"1.5GiB", 3 * GiB / 2, ""},
		{"0.5KiB", 512, ""},
		{"1.0GiB", GiB, ""},
		{"0.25MiB", 256 * KiB, ""},
		{"1.50000GiB", 3 * GiB / 2, ""},
		{"0001GiB", GiB, ""},
		{"8388607TiB", 8388607 * TiB, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775807B", math.MaxInt64, ""},

		{"", 0, `"" is not a size (use a number with KiB, MiB, GiB or TiB)`},
		{"12QB", 0, `"12QB" is not a size (use a number with KiB, MiB, GiB or TiB)`},
		{"GiB", 0, "is not a size (use"},
		{"1.1KiB", 0, "a fraction must come to a whole number of 512-octet blocks"},
		{"1.5", 0, "a fraction must come to a whole number of 512-octet blocks"},
		{"0.5B", 0, "a fraction must come to a whole number of 512-octet blocks"},
		{"1.KiB", 0, "is not a size (use"},
		{".5KiB", 0, "is not a size (use"},
		{"-1GiB", 0, "sizes cannot be negative"},
		{"-0", 0, "sizes cannot be negative"},
		{"+1GiB", 0, "is not a size (use"},
		{"1GB", 0, "the unit is GiB (binary units only"},
		{"1gib", 0, "the unit is GiB"},
		{"1G", 0, "the unit is GiB"},
		{"1 MB", 0, "the unit is MiB"},
		{"1kb", 0, "the unit is KiB"},
		{"3bytes", 0, "the unit is B"},
		{"1PiB", 0, "the largest unit is TiB"},
		{"1e9", 0, "is not a size (use"},
		{"0x200", 0, "is not a size (use"},
		{"1_000", 0, "is not a size (use"},
		{"1  GiB", 0, "is not a size (use"},
		{"1 ", 0, "is not a size (use"},
		{" 1GiB", 0, "is not a size (use"},
		{"1GiB ", 0, "is not a size (use"},
		{"1,5GiB", 0, "is not a size (use"},
		{"8388608TiB", 0, "too large"},
		{"9223372036854775808", 0, "too large"},
		{"99999999999999999999999999TiB", 0, "too large"},
		{strings.Repeat("1", 65), 0, "too long"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{511, "511B"},
		{512, "512B"},
		{1000, "1000B"},
		{KiB, "1KiB"},
		{1536, "1536B"},
		{3 * KiB / 2 * 2, "3KiB"},
		{1536 * MiB, "1536MiB"},
		{GiB, "1GiB"},
		{GiB + 512, "1073742336B"},
		{GiB + KiB, "1048577KiB"},
		{1024 * GiB, "1TiB"},
		{8388607 * TiB, "8388607TiB"},
		{math.MaxInt64, "9223372036854775807B"},
		{-GiB, "-1GiB"},
		{math.MinInt64, "-8388608TiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if tt.in >= 0 {
			back, err := ParseSize(tt.in.String())
			if err != nil || back != tt.in {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), back, err, int64(tt.in))
			}
		}
	}
}

// TestSizeYAML checks Size as a field of any yaml.v3 struct (as the initiator
// configuration and others may use it) and as a flag.Value.
func TestSizeYAML(t *testing.T) {
	type doc struct {
		S Size `yaml:"s"`
	}
	for _, tt := range []struct {
		in      string
		want    Size
		wantErr string
	}{
		{"s: 1GiB", GiB, ""},
		{"s: 1073741824", GiB, ""},
		{"s: 0x200", 512, ""},
		{"s: '1.5 GiB'", 3 * GiB / 2, ""},
		{"s: -512", 0, "line 1: -512 is not a size: sizes cannot be negative"},
		{"s: 1.5", 0, "line 1: the number 1.5 is not a size"},
		{"s: [1]", 0, "line 1: expected a size, found a list"},
		{"s: 12QB", 0, `line 1: "12QB" is not a size`},
		{"s: !!int abc", 0, `line 1: "abc" is not a size`},
		{"s: !!int 99999999999999999999", 0, "line 1: 99999999999999999999 is not a size: too large"},
		{"s: 99999999999999999999", 0, "line 1: 99999999999999999999 is not a size: too large"},
		{"s: -99999999999999999999", 0, "line 1: -99999999999999999999 is not a size: sizes cannot be negative"},
		{"s: 2026-11-01", 0, "line 1: the date 2026-11-01 is not a size"},
	} {
		var d doc
		err := yaml.Unmarshal([]byte(tt.in), &d)
		if tt.wantErr == "" {
			if err != nil || d.S != tt.want {
				t.Errorf("Unmarshal(%q) = %d, %v; want %d", tt.in, d.S, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Unmarshal(%q) = %v; want an error containing %q", tt.in, err, tt.wantErr)
		}
	}

	out, err := yaml.Marshal(doc{S: 1536 * MiB})
	if err != nil || string(out) != "s: 1536MiB\n" {
		t.Errorf("Marshal(1536MiB) = %q, %v; want %q", out, err, "s: 1536MiB\n")
	}
	if _, err := yaml.Marshal(doc{S: -1}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Marshal(-1) = %v; want an error about a negative size", err)
	}

	var s Size
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(&s, "size", "LUN size")
	if err := fs.Parse([]string{"-size", "2GiB"}); err != nil || s != 2*GiB {
		t.Errorf("flag -size 2GiB: got %v, %v", s, err)
	}
	fs.SetOutput(new(strings.Builder))
	if err := fs.Parse([]string{"-size", "2GB"}); err == nil {
		t.Errorf("flag -size 2GB: no error")
	}
}
