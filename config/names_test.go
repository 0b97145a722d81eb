package config

import (
	"strings"
	"testing"
)

func TestCheckISCSIName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string // "" for a valid name
	}{
		{"iqn.2026-11.io.ddpstore:disk1", ""},
		{"iqn.2026-11.io.ddpstore", ""},
		{"iqn.2026-11.io.ddpstore.disk1", ""},
		{"iqn.2001-04.com.example:storage:diskarrays-sn-a8675309", ""},
		{"iqn.2001-04.com.example:storage.tape1.sys1.xyz", ""},
		{"iqn.1991-05.com.microsoft:host-1.example.com", ""},
		{"iqn.2026-11.io.ddpstore:ディスク", ""},
		{"eui.02004567a425678d", ""},
		{"naa.52004567ba64678d", ""},
		{"naa.62004567ba64678d0123456789abcdef", ""},
		{"iqn.2026-11.io.ddpstore:" + strings.Repeat("x", MaxISCSINameLen-len("iqn.2026-11.io.ddpstore:")), ""},

		{"", "empty"},
		{"iqn.2026-11.io.ddpstore:" + strings.Repeat("x", MaxISCSINameLen-len("iqn.2026-11.io.ddpstore:")+1), "224 octets long, the limit is 223"},
		{"IQN.2026-11.io.ddpstore:disk1", `lower-case, write "iqn.2026-11.io.ddpstore:disk1"`},
		{"iqn.2026-11.io.ddpstore:Disk1", "lower-case"},
		{"eui.02004567A425678D", `write "eui.02004567a425678d"`},
		{"iqn.2026-11.io.ddpstore:disk_1", `'_' is not allowed`},
		{"iqn.2026-11.io.ddpstore:disk 1", `' ' is not allowed`},
		{"iqn.2026-11.io.ddpstore/disk1", `'/' is not allowed`},
		{"disk1", "must start with iqn., eui. or naa."},
		{"iscsi.2026-11.io.x", "must start with iqn., eui. or naa."},
		{"iqn.", `"" is not a date YYYY-MM`},
		{"iqn.26-11.io.ddpstore", `"26-11" is not a date YYYY-MM`},
		{"iqn.2026-1.io.ddpstore", `"2026-1" is not a date`},
		{"iqn.2026/11.io.ddpstore", `'/' is not allowed`},
		{"iqn.2026-13.io.ddpstore", "month 13"},
		{"iqn.2026-00.io.ddpstore", "month 00"},
		{"iqn.2026-11", "the reversed domain name after the date is missing"},
		{"iqn.2026-11.", "the reversed domain name after the date is missing"},
		{"iqn.2026-11.:disk", "the reversed domain name after the date is missing"},
		{"iqn.2026-11.io..ddpstore", "empty label"},
		{"iqn.2026-11.io.ddpstore.:x", "empty label"},
		{"iqn.2026-11.-io.ddpstore", "starts or ends with '-'"},
		{"iqn.2026-11.io.ddpstore:", "nothing follows the ':'"},
		{"eui.123", "16 hex digits: found 3"},
		{"eui.02004567a425678d0", "found 17"},
		{"eui.0200456xa425678d", "'x' is not a hex digit"},
		{"naa.123456789012345", "16 or 32 hex digits: found 15"},
		{"naa.52004567ba64678d01", "found 18"},
		{"naa.", "found 0"},
	}
	for _, tt := range tests {
		err := CheckISCSIName(tt.name)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("CheckISCSIName(%q) = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("CheckISCSIName(%q) = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in       string
		host     string
		port     int
		wildcard bool
		wantErr  string
	}{
		{"127.0.0.1:3260", "127.0.0.1", 3260, false, ""},
		{"0.0.0.0:3260", "0.0.0.0", 3260, true, ""},
		{":3260", "", 3260, true, ""},
		{"[::]:3260", "::", 3260, true, ""},
		{"[::1]:1", "::1", 1, false, ""},
		{"[0:0::1]:3260", "::1", 3260, false, ""},
		{"[fe80::1%eth0]:3260", "fe80::1%eth0", 3260, false, ""},
		{"[::ffff:10.0.0.1]:3260", "::ffff:10.0.0.1", 3260, false, ""},
		{"localhost:65535", "localhost", 65535, false, ""},
		{"Storage-1.Example.COM.:3260", "storage-1.example.com", 3260, false, ""},
		{"127.0.0.1:03260", "127.0.0.1", 3260, false, ""},

		{"127.0.0.1", "", 0, false, `has no port: write host:port, as 127.0.0.1:3260`},
		{"::1:3260", "", 0, false, "write an IPv6 address in brackets"},
		{"[::1]", "", 0, false, "has no port"},
		{"127.0.0.1:", "", 0, false, "no port after the colon"},
		{"127.0.0.1:0", "", 0, false, "the port 0 of \"127.0.0.1:0\" is out of range (1..65535)"},
		{"127.0.0.1:65536", "", 0, false, "out of range (1..65535)"},
		{"127.0.0.1:99999999999999999999", "", 0, false, "out of range"},
		{"127.0.0.1:iscsi", "", 0, false, `the port "iscsi" of "127.0.0.1:iscsi" is not a number`},
		{"127.0.0.1:-1", "", 0, false, "is not a number"},
		{"[127.0.0.1]:3260", "", 0, false, "brackets are for IPv6 addresses, write 127.0.0.1:3260"},
		{"[zz::1]:3260", "", 0, false, `"zz::1" is not an IPv6 address`},
		{"300.1.1.1:3260", "", 0, false, `"300.1.1.1" is not an IPv4 address`},
		{"1.2.3:3260", "", 0, false, "is not an IPv4 address"},
		{"host_name:3260", "", 0, false, `'_' may not appear in one`},
		{"-host:3260", "", 0, false, "is not an IP address or host name"},
		{"a..b:3260", "", 0, false, "is not an IP address or host name"},
		{"[::1:3260", "", 0, false, "is not host:port"},
	}
	for _, tt := range tests {
		hp, err := parseHostPort(tt.in, true)
		if tt.wantErr == "" {
			if err != nil || hp.host != tt.host || hp.port != tt.port || hp.wildcard != tt.wildcard {
				t.Errorf("parseHostPort(%q) = %+v, %v; want host %q port %d wildcard %v", tt.in, hp, err, tt.host, tt.port, tt.wildcard)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parseHostPort(%q) = %+v, %v; want an error containing %q", tt.in, hp, err, tt.wantErr)
		}
	}
	if _, err := parseHostPort(":3260", false); err == nil || !strings.Contains(err.Error(), "has no host") {
		t.Errorf("parseHostPort(:3260, no empty host) = %v, want an error about the missing host", err)
	}
}
