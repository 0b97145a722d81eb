package login

import (
	"errors"
	"strings"
	"testing"
)

// TestDefaults checks Defaults against the defaults of RFC 7143 section 13
// and RFC 7145 section 6.
func TestDefaults(t *testing.T) {
	d := Defaults()
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"MaxConnections (13.2)", d.MaxConnections, uint32(1)},
		{"InitialR2T (13.10)", d.InitialR2T, true},
		{"ImmediateData (13.11)", d.ImmediateData, true},
		{"MaxRecvDataSegmentLength (13.12)", d.MaxRecvDataSegmentLength, uint32(8192)},
		{"peer MaxRecvDataSegmentLength (13.12)", d.PeerMaxRecvDataSegmentLength, uint32(8192)},
		{"MaxBurstLength (13.13)", d.MaxBurstLength, uint32(262144)},
		{"FirstBurstLength (13.14)", d.FirstBurstLength, uint32(65536)},
		{"DefaultTime2Wait (13.15)", d.DefaultTime2Wait, uint32(2)},
		{"DefaultTime2Retain (13.16)", d.DefaultTime2Retain, uint32(20)},
		{"MaxOutstandingR2T (13.17)", d.MaxOutstandingR2T, uint32(1)},
		{"DataPDUInOrder (13.18)", d.DataPDUInOrder, true},
		{"DataSequenceInOrder (13.19)", d.DataSequenceInOrder, true},
		{"ErrorRecoveryLevel (13.20)", d.ErrorRecoveryLevel, uint32(0)},
		{"RDMAExtensions (RFC 7145 6.3)", d.RDMAExtensions, false},
		{"TargetRecvDataSegmentLength (RFC 7145 6.4)", d.TargetRecvDataSegmentLength, uint32(8192)},
		{"InitiatorRecvDataSegmentLength (RFC 7145 6.5)", d.InitiatorRecvDataSegmentLength, uint32(8192)},
		{"MaxOutstandingUnexpectedPDUs (RFC 7145 6.7)", d.MaxOutstandingUnexpectedPDUs, uint32(0)},
		{"MaxAHSLength (RFC 7145 6.8)", d.PeerMaxAHSLength, uint32(256)},
		{"TaggedBufferForSolicitedDataOnly (RFC 7145 6.9)", d.TaggedBufferForSolicitedDataOnly, false},
		{"iSERHelloRequired (RFC 7145 6.10)", d.ISERHelloRequired, false},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Defaults().Validate() = %v", err)
	}
}

// TestParamsValidate checks that an invalid Offer is refused with an
// error naming the key.
func TestParamsValidate(t *testing.T) {
	for _, c := range []struct {
		key string
		set func(*Params)
	}{
		{"MaxConnections", func(p *Params) { p.MaxConnections = 0 }},
		{"MaxConnections", func(p *Params) { p.MaxConnections = 65536 }},
		{"MaxBurstLength", func(p *Params) { p.MaxBurstLength = 511 }},
		{"MaxBurstLength", func(p *Params) { p.MaxBurstLength = 1 << 24 }},
		{"FirstBurstLength", func(p *Params) { p.FirstBurstLength = 100 }},
		{"FirstBurstLength", func(p *Params) { p.FirstBurstLength, p.MaxBurstLength = 65536, 8192 }},
		{"DefaultTime2Wait", func(p *Params) { p.DefaultTime2Wait = 3601 }},
		{"DefaultTime2Retain", func(p *Params) { p.DefaultTime2Retain = 4000 }},
		{"MaxOutstandingR2T", func(p *Params) { p.MaxOutstandingR2T = 0 }},
		{"ErrorRecoveryLevel", func(p *Params) { p.ErrorRecoveryLevel = 1 }},
		{"TargetRecvDataSegmentLength", func(p *Params) { p.TargetRecvDataSegmentLength = 0 }},
		{"InitiatorRecvDataSegmentLength", func(p *Params) { p.InitiatorRecvDataSegmentLength = 1 << 24 }},
		{"MaxRecvDataSegmentLength", func(p *Params) { p.MaxRecvDataSegmentLength = 256 }},
		{"MaxOutstandingUnexpectedPDUs", func(p *Params) { p.MaxOutstandingUnexpectedPDUs = 1 }},
	} {
		p := Defaults()
		c.set(&p)
		err := p.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%+v: %v, want an error about %s", p, err, c.key)
		}
	}
}

// TestStatus checks the status codes of section 11.13.5 and StatusError.
func TestStatus(t *testing.T) {
	for s, name := range map[Status]string{
		StatusSuccess: "Success", 0x0101: "Target moved temporarily", 0x0102: "Target moved permanently",
		0x0200: "Initiator error", 0x0201: "Authentication failure", 0x0202: "Authorization failure",
		0x0203: "Not found", 0x0204: "Target removed", 0x0205: "Unsupported version",
		0x0206: "Too many connections", 0x0207: "Missing parameter", 0x0208: "Can't include in session",
		0x0209: "Session type not supported", 0x020a: "Session does not exist", 0x020b: "Invalid during login",
		0x0300: "Target error", 0x0301: "Service unavailable", 0x0302: "Out of resources",
		0x0150: "Redirection (unallocated detail)", 0x0500: "unallocated Status-Class",
	} {
		if s.String() != name {
			t.Errorf("0x%04x: %q, want %q", uint16(s), s.String(), name)
		}
	}
	e := statusErr(StatusNotFound, "TargetName=%q", "x")
	if e.Class != 2 || e.Detail != 3 || !errors.Is(e, StatusNotFound) || errors.Is(e, StatusAuthFailure) ||
		!errors.Is(e, &StatusError{Class: 2, Detail: 3}) || e.Error() != `login failed: login status 0x0203 (Not found): TargetName="x"` {
		t.Errorf("%#v: %v", e, e)
	}
	var wrapped error = &ProtocolError{Err: ErrTargetAuthentication, Reason: "r"}
	if !errors.Is(wrapped, ErrTargetAuthentication) || errors.Is(wrapped, ErrProtocol) || wrapped.Error() != ErrTargetAuthentication.Error()+": r" {
		t.Errorf("%v", wrapped)
	}
}
