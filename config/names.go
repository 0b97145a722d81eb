package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxISCSINameLen is the longest iSCSI name in octets (RFC 7143 section 4.2.7).
const MaxISCSINameLen = 223

// CheckISCSIName returns nil if name is a valid iSCSI name (RFC 7143 section
// 4.2.7), or an error saying what is wrong with it. The accepted forms are
//
//	iqn.YYYY-MM.reversed.domain[:anything]   iqn.2026-11.io.ddpstore:disk1
//	eui. and 16 hex digits                   eui.02004567a425678d
//	naa. and 16 or 32 hex digits             naa.52004567ba64678d
//
// in lower case (the RFC 3722 stringprep profile maps names to lower case, so
// a configuration must hold them that way), at most 223 octets, made of a-z,
// 0-9, '-', '.', ':' and non-ASCII letters and digits.
func CheckISCSIName(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%q is not an iSCSI name: %s", clip(name), fmt.Sprintf(format, args...))
	}
	switch {
	case name == "":
		return errors.New("empty: expected an iSCSI name")
	case len(name) > MaxISCSINameLen:
		return bad("%d octets long, the limit is %d (RFC 7143 section 4.2.7)", len(name), MaxISCSINameLen)
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	}
	if lower := strings.ToLower(name); lower != name {
		return bad("iSCSI names are lower-case, write %q", clip(lower))
	}
	for _, r := range name {
		if !nameRune(r) && r != '.' && r != ':' && r != '-' {
			return bad("%q is not allowed (a-z, 0-9, '-', '.', ':' and non-ASCII letters are)", r)
		}
	}
	const forms = "iqn.YYYY-MM.reversed.domain[:name], eui. and 16 hex digits, or naa. and 16 or 32 hex digits"
	prefix, rest, _ := strings.Cut(name, ".")
	switch prefix {
	case "iqn":
		if msg := checkIQN(rest); msg != "" {
			return bad("%s (iqn.YYYY-MM.reversed.domain[:name], RFC 7143 section 4.2.7)", msg)
		}
	case "eui":
		if msg := checkHex(rest, 16); msg != "" {
			return bad("eui. must be followed by 16 hex digits: %s", msg)
		}
	case "naa":
		want := 16
		if len(rest) > 16 {
			want = 32
		}
		if msg := checkHex(rest, want); msg != "" {
			return bad("naa. must be followed by 16 or 32 hex digits: %s", msg)
		}
	default:
		return bad("it must start with iqn., eui. or naa. (%s)", forms)
	}
	return nil
}

// nameRune reports whether r is a letter or digit an iSCSI name may hold.
func nameRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
	}
	return (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) && !unicode.IsUpper(r)
}

// checkIQN checks what follows "iqn." and returns what is wrong, or "".
func checkIQN(rest string) string {
	date, rest, hasDot := strings.Cut(rest, ".")
	if len(date) != 7 || date[4] != '-' || !digits(date[:4]) || !digits(date[5:]) {
		return fmt.Sprintf("%q is not a date YYYY-MM (the month the naming authority owned the domain)", clip(date))
	}
	if m, _ := strconv.Atoi(date[5:]); m < 1 || m > 12 {
		return fmt.Sprintf("month %s of %q is not 01..12", date[5:], date)
	}
	authority, unique, hasColon := strings.Cut(rest, ":")
	if !hasDot || authority == "" {
		return "the reversed domain name after the date is missing"
	}
	for _, label := range strings.Split(authority, ".") {
		if label == "" {
			return fmt.Sprintf("the domain %q has an empty label", clip(authority))
		}
		if strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return fmt.Sprintf("the domain label %q starts or ends with '-'", clip(label))
		}
	}
	if hasColon && unique == "" {
		return "nothing follows the ':'"
	}
	return ""
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// checkHex checks that s is exactly n lower-case hex digits.
func checkHex(s string, n int) string {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return fmt.Sprintf("%q is not a hex digit", r)
		}
	}
	if len(s) != n {
		return fmt.Sprintf("found %d", len(s))
	}
	return ""
}

// hostPort is a checked host:port address.
type hostPort struct {
	host     string // canonical: an address as netip prints it, or a lower-case host name
	port     int
	wildcard bool // every address: empty host, 0.0.0.0 or ::
}

// parseHostPort checks a host:port address: a port 1..65535, and an IPv4
// address, an IPv6 address in brackets or a host name. An empty host (":3260")
// is allowed when emptyHost is set and means every address.
func parseHostPort(s string, emptyHost bool) (hostPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		why := err.Error()
		if errors.As(err, &ae) {
			why = ae.Err
		}
		switch {
		case strings.Contains(why, "missing port"):
			return hostPort{}, fmt.Errorf("%q has no port: write host:port, as %s", clip(s), net.JoinHostPort(strings.Trim(s, "[]"), "3260"))
		case strings.Contains(why, "too many colons"):
			return hostPort{}, fmt.Errorf("%q is ambiguous: write an IPv6 address in brackets, as [::1]:3260", clip(s))
		}
		return hostPort{}, fmt.Errorf("%q is not host:port: %s", clip(s), why)
	}
	var hp hostPort
	switch {
	case port == "":
		return hostPort{}, fmt.Errorf("%q has no port after the colon", clip(s))
	case !digits(port):
		return hostPort{}, fmt.Errorf("the port %q of %q is not a number", clip(port), clip(s))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return hostPort{}, fmt.Errorf("the port %s of %q is out of range (1..65535)", clip(port), clip(s))
	} else {
		hp.port = n
	}
	bracketed := strings.HasPrefix(s, "[")
	addr, addrErr := netip.ParseAddr(host)
	switch {
	case bracketed && (addrErr != nil || !addr.Is6()):
		if addrErr == nil {
			return hostPort{}, fmt.Errorf("%q: brackets are for IPv6 addresses, write %s", clip(s), net.JoinHostPort(host, port))
		}
		return hostPort{}, fmt.Errorf("%q: %q is not an IPv6 address", clip(s), clip(host))
	case host == "":
		if !emptyHost {
			return hostPort{}, fmt.Errorf("%q has no host: write the address to dial, as 127.0.0.1:%s", clip(s), port)
		}
		hp.wildcard = true
	case addrErr == nil:
		hp.host, hp.wildcard = addr.String(), addr.IsUnspecified()
	default:
		if msg := checkHostName(host); msg != "" {
			return hostPort{}, fmt.Errorf("%q: %s", clip(s), msg)
		}
		hp.host = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	return hp, nil
}

// checkHostName checks a DNS host name (RFC 1123) and returns what is wrong.
func checkHostName(h string) string {
	if strings.Trim(h, "0123456789.") == "" {
		return fmt.Sprintf("%q is not an IPv4 address", clip(h))
	}
	name := strings.TrimSuffix(h, ".")
	if len(name) > 253 || name == "" {
		return fmt.Sprintf("%q is not a host name (1 to 253 characters)", clip(h))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Sprintf("%q is not an IP address or host name (label %q)", clip(h), clip(label))
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Sprintf("%q is not an IP address or host name (%q may not appear in one)", clip(h), rune(c))
			}
		}
	}
	return ""
}
