package rdmap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// allErrors lists every error number this package names or converts: the
// RDMAP rows of Figure 9, every DDP row of RFC 5041 7.2 and the MPA codes.
func allErrors() []struct {
	e                 Error
	layer             Layer
	etype             ErrorType
	code              uint8
	text              string
	withDDP, withRDMA bool
} {
	return []struct {
		e                 Error
		layer             Layer
		etype             ErrorType
		code              uint8
		text              string
		withDDP, withRDMA bool
	}{
		{ErrLocalCatastrophic, 0, 0, 0x00, "RDMAP local catastrophic error", false, false},
		{ErrInvalidSTag, 0, 1, 0x00, "RDMAP remote protection error: invalid STag", true, true},
		{ErrBaseBounds, 0, 1, 0x01, "RDMAP remote protection error: base or bounds violation", true, true},
		{ErrAccessRights, 0, 1, 0x02, "RDMAP remote protection error: access rights violation", true, true},
		{ErrSTagNotAssociated, 0, 1, 0x03, "RDMAP remote protection error: STag not associated with RDMAP Stream", true, true},
		{ErrTOWrap, 0, 1, 0x04, "RDMAP remote protection error: TO wrap", true, true},
		{ErrProtectionCannotInvalidate, 0, 1, 0x09, "RDMAP remote protection error: STag cannot be Invalidated", true, true},
		{ErrProtectionUnspecified, 0, 1, 0xff, "RDMAP remote protection error: unspecified error", true, true},
		{ErrInvalidVersion, 0, 2, 0x05, "RDMAP remote operation error: invalid RDMAP version", true, false},
		{ErrUnexpectedOpcode, 0, 2, 0x06, "RDMAP remote operation error: unexpected OpCode", true, false},
		{ErrCatastrophicStream, 0, 2, 0x07, "RDMAP remote operation error: catastrophic error, localized to RDMAP Stream", true, false},
		{ErrCatastrophicGlobal, 0, 2, 0x08, "RDMAP remote operation error: catastrophic error, global", true, false},
		{ErrOperationCannotInvalidate, 0, 2, 0x09, "RDMAP remote operation error: STag cannot be Invalidated", true, false},
		{ErrOperationUnspecified, 0, 2, 0xff, "RDMAP remote operation error: unspecified error", true, false},

		{FromDDP(ddp.ErrLocalCatastrophic), 1, 0, 0x00, "DDP local catastrophic", false, false},
		{FromDDP(ddp.ErrInvalidSTag), 1, 1, 0x00, "DDP tagged buffer error: invalid STag", true, false},
		{FromDDP(ddp.ErrBaseBounds), 1, 1, 0x01, "DDP tagged buffer error: base or bounds violation", true, false},
		{FromDDP(ddp.ErrSTagNotAssociated), 1, 1, 0x02, "DDP tagged buffer error: STag not associated with DDP Stream", true, false},
		{FromDDP(ddp.ErrTOWrap), 1, 1, 0x03, "DDP tagged buffer error: TO wrap", true, false},
		{FromDDP(ddp.ErrTaggedVersion), 1, 1, 0x04, "DDP tagged buffer error: invalid DDP version", true, false},
		{FromDDP(ddp.ErrInvalidQN), 1, 2, 0x01, "DDP untagged buffer error: invalid QN", true, false},
		{FromDDP(ddp.ErrMSNNoBuffer), 1, 2, 0x02, "DDP untagged buffer error: invalid MSN - no buffer available", true, false},
		{FromDDP(ddp.ErrMSNRange), 1, 2, 0x03, "DDP untagged buffer error: invalid MSN - MSN range is not valid", true, false},
		{FromDDP(ddp.ErrInvalidMO), 1, 2, 0x04, "DDP untagged buffer error: invalid MO", true, false},
		{FromDDP(ddp.ErrMessageTooLong), 1, 2, 0x05, "DDP untagged buffer error: DDP Message too long for available buffer", true, false},
		{FromDDP(ddp.ErrUntaggedVersion), 1, 2, 0x06, "DDP untagged buffer error: invalid DDP version", true, false},

		{FromMPA(1), 2, 0, 1, "LLP (MPA) error: TCP connection closed, terminated or lost", false, false},
		{FromMPA(2), 2, 0, 2, "LLP (MPA) error: MPA CRC error", false, false},
		{FromMPA(3), 2, 0, 3, "LLP (MPA) error: MPA Marker and ULPDU Length disagree", false, false},
		{FromMPA(4), 2, 0, 4, "LLP (MPA) error: invalid MPA Request or Reply frame", false, false},
		{FromMPA(5), 2, 0, 5, "LLP (MPA) error: local catastrophic error", false, false},
		{FromMPA(6), 2, 0, 6, "LLP (MPA) error: insufficient IRD resources", false, false},
		{FromMPA(7), 2, 0, 7, "LLP (MPA) error: no matching RTR option", false, false},
	}
}

func TestErrorNumbers(t *testing.T) {
	seen := map[Error]bool{}
	for _, tt := range allErrors() {
		e := tt.e
		if e.Layer != tt.layer || e.Type != tt.etype || e.Code != tt.code {
			t.Errorf("%v = %d/%d/%#02x, want %d/%d/%#02x", e, e.Layer, e.Type, e.Code, tt.layer, tt.etype, tt.code)
		}
		if e.String() != tt.text || e.Error() != "rdmap: "+tt.text {
			t.Errorf("String() = %q, want %q", e.String(), tt.text)
		}
		if d, r := e.Includes(); d != tt.withDDP || r != tt.withRDMA {
			t.Errorf("%v: Includes() = %v, %v; want %v, %v", e, d, r, tt.withDDP, tt.withRDMA)
		}
		if seen[e] {
			t.Errorf("%v is not distinct", e)
		}
		seen[e] = true
		var err error = e
		if !errors.Is(err, e) || errors.Is(err, Error{0xe, 0xe, 0xe}) {
			t.Errorf("errors.Is misbehaves for %v", e)
		}
		if ErrorOf(err) != e || ErrorOf(fmt.Errorf("wrapped: %w", err)) != e {
			t.Errorf("ErrorOf(%v) = %v", e, ErrorOf(err))
		}
		// Every error survives a Terminate round trip.
		b := make([]byte, MaxTerminateLen)
		n, err := NewTerminate(e, rrHdr, 46, rrBody).Encode(b)
		if err != nil {
			t.Fatalf("%v: Encode: %v", e, err)
		}
		term, err := ParseTerminate(b[:n])
		if err != nil || term.Err() != e {
			t.Errorf("%v: Terminate round trip gave %v, %v", e, term.Err(), err)
		}
	}
}

func TestErrorConversions(t *testing.T) {
	for _, de := range []ddp.Error{ddp.ErrLocalCatastrophic, ddp.ErrInvalidSTag, ddp.ErrMSNRange, ddp.ErrUntaggedVersion} {
		e := FromDDP(de)
		if back, ok := e.DDP(); !ok || back != de {
			t.Errorf("FromDDP(%v).DDP() = %v, %v", de, back, ok)
		}
		if ErrorOf(de) != e {
			t.Errorf("ErrorOf(%v) = %v", de, ErrorOf(de))
		}
		if _, ok := e.MPA(); ok {
			t.Errorf("%v claims to be an MPA error", e)
		}
	}
	for code := uint8(1); code <= 7; code++ {
		e := FromMPA(code)
		if c, ok := e.MPA(); !ok || c != code {
			t.Errorf("FromMPA(%d).MPA() = %d, %v", code, c, ok)
		}
		if _, ok := e.DDP(); ok {
			t.Errorf("%v claims to be a DDP error", e)
		}
	}
	if _, ok := ErrInvalidSTag.DDP(); ok {
		t.Error("an RDMAP error claims to be a DDP error")
	}
	if _, ok := (Error{LayerLLP, 1, 2}).MPA(); ok {
		t.Error("an LLP error of EType 1 claims to be an MPA error")
	}
	others := []error{
		nil,
		errors.New("unknown"),
		ErrReadRequestLen,
		ErrShortTerminate,
		ddp.ErrShortHeader,
		fmt.Errorf("wrapped: %w", ddp.ErrWrongModel),
	}
	for _, err := range others {
		if got := ErrorOf(err); got != ErrOperationUnspecified {
			t.Errorf("ErrorOf(%v) = %v", err, got)
		}
	}
	if got := ErrorOf(fmt.Errorf("a: %w", fmt.Errorf("b: %w", ddp.ErrTOWrap))); got != FromDDP(ddp.ErrTOWrap) {
		t.Errorf("ErrorOf(doubly wrapped) = %v", got)
	}
}

func TestErrorStringsOfUnlistedNumbers(t *testing.T) {
	tests := []struct {
		e    Error
		text string
	}{
		{Error{LayerRDMAP, TypeRemoteProtection, 0x05}, "RDMAP remote protection error: code 0x5"},
		{Error{LayerRDMAP, TypeRemoteOperation, 0x00}, "RDMAP remote operation error: code 0x0"},
		{Error{LayerRDMAP, 7, 0x01}, "RDMAP error type 7: code 0x1"},
		{Error{LayerDDP, 3, 0x10}, "DDP LLP error: code 0x10"},
		{Error{LayerLLP, TypeMPA, 99}, "LLP (MPA) error: code 99"},
		{Error{LayerLLP, 4, 9}, "LLP error type 4: code 9"},
		{Error{9, 1, 2}, "layer 9 error type 1: code 2"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.text {
			t.Errorf("String() = %q, want %q", got, tt.text)
		}
		if d, r := tt.e.Includes(); tt.e.Layer >= LayerLLP && (d || r) {
			t.Errorf("%v includes headers", tt.e)
		}
	}
	for _, l := range []Layer{LayerRDMAP, LayerDDP, LayerLLP} {
		if strings.HasPrefix(l.String(), "layer") {
			t.Errorf("layer %d unnamed", l)
		}
	}
	for _, e := range []*FormatError{ErrShortBuffer, ErrReadRequestLen, ErrShortTerminate, ErrTerminatedHeader,
		ErrTerminatedRDMAHeader, ErrErrorNumber, ErrWrongModel} {
		if !strings.HasPrefix(e.Error(), "rdmap: ") {
			t.Errorf("%q lacks the package prefix", e.Error())
		}
	}
}
