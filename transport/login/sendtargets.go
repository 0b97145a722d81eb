package login

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// Portal is a network portal of a target: its address and the Target
// Portal Group Tag it belongs to (sections 13.8, 13.9).
type Portal struct {
	// Addr is host[:port]: a DNS name, a dotted-decimal IPv4 address or a
	// bracketed IPv6 address, with an optional TCP port, as
	// "127.0.0.1:3260" or "[::1]:3260".
	Addr string
	TPGT uint16
}

// TargetInfo is one target record of a SendTargets response (appendix C):
// a TargetName and its portals.
type TargetInfo struct {
	Name    string
	Portals []Portal
}

// SendTargets values (appendix C).
const (
	SendTargetsAll = "All" // every target the initiator may access (Discovery sessions)
)

// AppendSendTargets appends to dst the data segment of the Text Response
// to SendTargets=query (RFC 7143 appendix C): for each target record one
// TargetName key followed by one TargetAddress=<addr>,<tpgt> key per
// portal.
//
// query "All" (SendTargetsAll) selects every target in targets, an iSCSI
// name selects the target of that name (none: empty text), and the empty
// query, which asks for the target the session is logged in to, selects
// every target in targets: the caller passes only that target. Which
// values a session type may use (All only on Discovery sessions, "" on
// Normal ones) is the caller's policy.
//
// The text is not padded; a response longer than the initiator's
// MaxRecvDataSegmentLength goes out in several Text Response PDUs with the
// C bit (section 6.1). Errors name the offending target or portal.
func AppendSendTargets(dst []byte, query string, targets []TargetInfo) ([]byte, error) {
	if query != SendTargetsAll && query != "" {
		if err := checkName(query); err != nil {
			return dst, fmt.Errorf("login: %s: %v", kv("SendTargets", query), err)
		}
	}
	out := dst
	for _, t := range targets {
		if query != SendTargetsAll && query != "" && t.Name != query {
			continue
		}
		if err := checkName(t.Name); err != nil {
			return dst, fmt.Errorf("login: %s: %v", kv("TargetName", t.Name), err)
		}
		var err error
		if out, err = iscsi.AppendText(out, "TargetName", t.Name); err != nil {
			return dst, fmt.Errorf("login: %s: %v", kv("TargetName", t.Name), err)
		}
		for _, p := range t.Portals {
			if err := checkAddr(p.Addr); err != nil {
				return dst, fmt.Errorf("login: portal %s of %s: %v", quote(p.Addr), kv("TargetName", t.Name), err)
			}
			v := p.Addr + "," + strconv.Itoa(int(p.TPGT))
			if out, err = iscsi.AppendText(out, "TargetAddress", v); err != nil {
				return dst, fmt.Errorf("login: %s: %v", kv("TargetAddress", v), err)
			}
		}
	}
	return out, nil
}

// ParseSendTargets parses the text of a SendTargets response (appendix C):
// target records, each a TargetName key followed by zero or more
// TargetAddress=<host[:port]>,<tpgt> keys. Padding zeros after the last
// pair are allowed. Any other key, a TargetAddress before the first
// TargetName or without its portal group tag, and malformed names or
// addresses are errors naming the key and value.
func ParseSendTargets(data []byte) ([]TargetInfo, error) {
	var out []TargetInfo
	it := iscsi.ParseText(data)
	for it.Next() {
		k, v := string(it.Key()), string(it.Value())
		switch k {
		case "TargetName":
			if err := checkName(v); err != nil {
				return nil, fmt.Errorf("login: SendTargets response: %s: %v", kv(k, v), err)
			}
			out = append(out, TargetInfo{Name: v})
		case "TargetAddress":
			if len(out) == 0 {
				return nil, fmt.Errorf("login: SendTargets response: %s before any TargetName (appendix C)", kv(k, v))
			}
			comma := strings.LastIndexByte(v, ',')
			if comma < 0 {
				return nil, fmt.Errorf("login: SendTargets response: %s without its portal-group-tag (section 13.8)", kv(k, v))
			}
			addr, tag := v[:comma], v[comma+1:]
			if err := checkAddr(addr); err != nil {
				return nil, fmt.Errorf("login: SendTargets response: %s: %v", kv(k, v), err)
			}
			n, err := parseNumber(tag)
			if err == nil && n > 65535 {
				err = fmt.Errorf("outside 0 to 65535")
			}
			if err != nil {
				return nil, fmt.Errorf("login: SendTargets response: %s: portal-group-tag: %v", kv(k, v), err)
			}
			last := &out[len(out)-1]
			last.Portals = append(last.Portals, Portal{Addr: addr, TPGT: uint16(n)})
		default:
			return nil, fmt.Errorf("login: SendTargets response: %s: only TargetName and TargetAddress are permitted (appendix C)", kv(k, v))
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("login: SendTargets response: %v", err)
	}
	return out, nil
}

// checkAddr checks the domainname[:port] part of a TargetAddress (section
// 13.8): a host name or IPv4 address of letters, digits, '-', '.' and '_',
// or an IPv6 address in brackets, then optionally ':' and a decimal port
// from 1 to 65535.
func checkAddr(a string) error {
	host, port := a, ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return fmt.Errorf("IPv6 address without its closing bracket")
		}
		host, port = a[1:end], a[end+1:]
		if host == "" {
			return fmt.Errorf("empty IPv6 address")
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !isHex(c) && c != ':' && c != '.' && c != '%' {
				return fmt.Errorf("IPv6 address with the character %q", c)
			}
		}
		if port != "" {
			if port[0] != ':' {
				return fmt.Errorf("garbage %q after the IPv6 address", port)
			}
			port = port[1:]
		}
	} else {
		if i := strings.IndexByte(a, ':'); i >= 0 {
			host, port = a[:i], a[i+1:]
		}
		if host == "" {
			return fmt.Errorf("empty host")
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return fmt.Errorf("host with the character %q", c)
			}
		}
		if i := strings.IndexByte(a, ':'); i >= 0 && port == "" {
			return fmt.Errorf("empty port")
		}
	}
	if port == "" {
		return nil
	}
	if port[0] == '0' {
		return fmt.Errorf("port %q with a leading zero", port)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	return nil
}
