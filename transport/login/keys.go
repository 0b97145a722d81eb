package login

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The reserved constants of section 6.2 (and "None" of section 6.2.1).
const (
	valNone          = "None"
	valReject        = "Reject"
	valIrrelevant    = "Irrelevant"
	valNotUnderstood = "NotUnderstood"
	valYes           = "Yes"
	valNo            = "No"
	valCRC32C        = "CRC32C" // the digest of section 13.1
)

// keyKind is how a key is negotiated (section 6.2) or who handles it.
type keyKind uint8

const (
	kindDeclarative keyKind = iota // declared, no answer (section 6)
	kindAnd                        // Boolean, result function AND (section 6.2.2)
	kindOr                         // Boolean, result function OR
	kindMin                        // numerical, result function Minimum (section 13)
	kindMax                        // numerical, result function Maximum
	kindList                       // list-of-values (section 6.2.1)
	kindObsolete                   // IFMarker, OFMarker: answered Reject or Irrelevant (section 13.25, RFC 7145 section 6.6)
	kindObsoleteInt                // IFMarkInt, OFMarkInt: answered Reject (section 13.25)
	kindFFPOnly                    // SendTargets: Full Feature Phase only (section 13.3)
	kindSession                    // InitiatorName, TargetName, SessionType, aliases, TargetAddress, TargetPortalGroupTag
	kindAuth                       // AuthMethod and the CHAP keys (section 12)
)

// keyFlags are the Use, Senders and "Irrelevant when" lines of a key's
// definition.
type keyFlags uint16

const (
	fromInitiator  keyFlags = 1 << iota // an initiator may send it
	fromTarget                          // a target may send it
	anyStage                            // allowed in SecurityNegotiation too ("Any-Stage")
	securityOnly                        // only in SecurityNegotiation (section 12)
	leadingOnly                         // Use: LO
	irrDiscovery                        // Irrelevant when: SessionType=Discovery
	irrWithRDMA                         // Irrelevant when: RDMAExtensions=Yes (RFC 7145 sections 6.1, 6.2, 6.6)
	irrWithoutRDMA                      // Irrelevant when: RDMAExtensions=No (RFC 7145 sections 6.4 to 6.10)
	later                               // defined after RFC 7143 (RFC 7144, 7145): NotUnderstood is a legal answer
	numeric                             // value is a numerical-value
	boolean                             // value is a boolean-value
	zeroOK                              // 0 allowed below min ("<numerical-value-from-2-to-(2**32-1) | 0>")
)

const both = fromInitiator | fromTarget

// keyDef is one key of sections 12 and 13 of RFC 7143, RFC 7144 and
// section 6 of RFC 7145.
type keyDef struct {
	name     string
	kind     keyKind
	flags    keyFlags
	min, max uint64
	num      func(*Params) *uint32 // the Params field of a numerical key, if any
	flag     func(*Params) *bool   // the Params field of a Boolean key, or of a digest (true: CRC32C)
	def      uint64                // default of a numerical key without a Params field
}

func (d *keyDef) has(f keyFlags) bool { return d.flags&f != 0 }

// Indices into keyTable of the keys the state machines refer to by name.
const (
	kSessionType = iota
	kInitiatorName
	kTargetName
	kInitiatorAlias
	kTargetAlias
	kTargetAddress
	kTargetPortalGroupTag
	kAuthMethod
	kCHAPA
	kCHAPI
	kCHAPC
	kCHAPN
	kCHAPR
	kHeaderDigest
	kDataDigest
	kRDMAExtensions
	kInitialR2T
	kImmediateData
	kMaxBurstLength
	kFirstBurstLength
	kMaxConnections
	kMaxOutstandingR2T
	kDefaultTime2Wait
	kDefaultTime2Retain
	kDataPDUInOrder
	kDataSequenceInOrder
	kErrorRecoveryLevel
	kTargetRecvDataSegmentLength
	kInitiatorRecvDataSegmentLength
	kMaxOutstandingUnexpectedPDUs
	kMaxRecvDataSegmentLength
	kMaxAHSLength
	kISERHelloRequired
	kTaggedBufferForSolicitedDataOnly
	kTaskReporting
	kISCSIProtocolLevel
	kIFMarker
	kOFMarker
	kIFMarkInt
	kOFMarkInt
	kSendTargets
	kNodeArchitecture
	numKeys
)

const maxLen24 = 1<<24 - 1

var keyTable = [numKeys]keyDef{
	kSessionType:          {name: "SessionType", kind: kindSession, flags: fromInitiator | anyStage | leadingOnly},
	kInitiatorName:        {name: "InitiatorName", kind: kindSession, flags: fromInitiator | anyStage},
	kTargetName:           {name: "TargetName", kind: kindSession, flags: fromInitiator | anyStage},
	kInitiatorAlias:       {name: "InitiatorAlias", kind: kindSession, flags: fromInitiator | anyStage},
	kTargetAlias:          {name: "TargetAlias", kind: kindSession, flags: fromTarget | anyStage},
	kTargetAddress:        {name: "TargetAddress", kind: kindSession, flags: fromTarget | anyStage},
	kTargetPortalGroupTag: {name: "TargetPortalGroupTag", kind: kindSession, flags: fromTarget | anyStage | numeric, max: 65535},
	kAuthMethod:           {name: "AuthMethod", kind: kindAuth, flags: both | securityOnly},
	kCHAPA:                {name: "CHAP_A", kind: kindAuth, flags: both | securityOnly},
	kCHAPI:                {name: "CHAP_I", kind: kindAuth, flags: both | securityOnly},
	kCHAPC:                {name: "CHAP_C", kind: kindAuth, flags: both | securityOnly},
	kCHAPN:                {name: "CHAP_N", kind: kindAuth, flags: both | securityOnly},
	kCHAPR:                {name: "CHAP_R", kind: kindAuth, flags: both | securityOnly},

	kHeaderDigest:   {name: "HeaderDigest", kind: kindList, flags: both | irrWithRDMA, flag: func(p *Params) *bool { return &p.HeaderDigest }},
	kDataDigest:     {name: "DataDigest", kind: kindList, flags: both | irrWithRDMA, flag: func(p *Params) *bool { return &p.DataDigest }},
	kRDMAExtensions: {name: "RDMAExtensions", kind: kindAnd, flags: both | leadingOnly | irrDiscovery | later | boolean, flag: func(p *Params) *bool { return &p.RDMAExtensions }},
	kInitialR2T:     {name: "InitialR2T", kind: kindOr, flags: both | leadingOnly | irrDiscovery | boolean, flag: func(p *Params) *bool { return &p.InitialR2T }},
	kImmediateData:  {name: "ImmediateData", kind: kindAnd, flags: both | leadingOnly | irrDiscovery | boolean, flag: func(p *Params) *bool { return &p.ImmediateData }},
	kMaxBurstLength: {name: "MaxBurstLength", kind: kindMin, flags: both | leadingOnly | irrDiscovery | numeric, min: 512, max: maxLen24,
		num: func(p *Params) *uint32 { return &p.MaxBurstLength }},
	kFirstBurstLength: {name: "FirstBurstLength", kind: kindMin, flags: both | leadingOnly | irrDiscovery | numeric, min: 512, max: maxLen24,
		num: func(p *Params) *uint32 { return &p.FirstBurstLength }},
	kMaxConnections: {name: "MaxConnections", kind: kindMin, flags: both | leadingOnly | irrDiscovery | numeric, min: 1, max: 65535,
		num: func(p *Params) *uint32 { return &p.MaxConnections }},
	kMaxOutstandingR2T: {name: "MaxOutstandingR2T", kind: kindMin, flags: both | leadingOnly | irrDiscovery | numeric, min: 1, max: 65535,
		num: func(p *Params) *uint32 { return &p.MaxOutstandingR2T }},
	kDefaultTime2Wait: {name: "DefaultTime2Wait", kind: kindMax, flags: both | leadingOnly | numeric, max: 3600,
		num: func(p *Params) *uint32 { return &p.DefaultTime2Wait }},
	kDefaultTime2Retain: {name: "DefaultTime2Retain", kind: kindMin, flags: both | leadingOnly | numeric, max: 3600,
		num: func(p *Params) *uint32 { return &p.DefaultTime2Retain }},
	kDataPDUInOrder: {name: "DataPDUInOrder", kind: kindOr, flags: both | leadingOnly | irrDiscovery | boolean,
		flag: func(p *Params) *bool { return &p.DataPDUInOrder }},
	kDataSequenceInOrder: {name: "DataSequenceInOrder", kind: kindOr, flags: both | leadingOnly | irrDiscovery | boolean,
		flag: func(p *Params) *bool { return &p.DataSequenceInOrder }},
	kErrorRecoveryLevel: {name: "ErrorRecoveryLevel", kind: kindMin, flags: both | leadingOnly | numeric, max: 2,
		num: func(p *Params) *uint32 { return &p.ErrorRecoveryLevel }},
	kTargetRecvDataSegmentLength: {name: "TargetRecvDataSegmentLength", kind: kindMin, flags: both | irrDiscovery | irrWithoutRDMA | later | numeric, min: 512, max: maxLen24,
		num: func(p *Params) *uint32 { return &p.TargetRecvDataSegmentLength }},
	kInitiatorRecvDataSegmentLength: {name: "InitiatorRecvDataSegmentLength", kind: kindMin, flags: both | irrDiscovery | irrWithoutRDMA | later | numeric, min: 512, max: maxLen24,
		num: func(p *Params) *uint32 { return &p.InitiatorRecvDataSegmentLength }},
	kMaxOutstandingUnexpectedPDUs: {name: "MaxOutstandingUnexpectedPDUs", kind: kindDeclarative, flags: both | leadingOnly | irrDiscovery | irrWithoutRDMA | later | numeric | zeroOK, min: 2, max: 1<<32 - 1,
		num: func(p *Params) *uint32 { return &p.PeerMaxOutstandingUnexpectedPDUs }},
	kMaxRecvDataSegmentLength: {name: "MaxRecvDataSegmentLength", kind: kindDeclarative, flags: both | irrWithRDMA | numeric, min: 512, max: maxLen24,
		num: func(p *Params) *uint32 { return &p.PeerMaxRecvDataSegmentLength }},
	kMaxAHSLength: {name: "MaxAHSLength", kind: kindDeclarative, flags: both | leadingOnly | irrDiscovery | irrWithoutRDMA | later | numeric | zeroOK, min: 2, max: 1<<32 - 1,
		num: func(p *Params) *uint32 { return &p.PeerMaxAHSLength }},
	kISERHelloRequired: {name: "iSERHelloRequired", kind: kindDeclarative, flags: fromInitiator | leadingOnly | irrDiscovery | irrWithoutRDMA | later | boolean,
		flag: func(p *Params) *bool { return &p.ISERHelloRequired }},
	kTaggedBufferForSolicitedDataOnly: {name: "TaggedBufferForSolicitedDataOnly", kind: kindDeclarative, flags: fromInitiator | leadingOnly | irrDiscovery | irrWithoutRDMA | later | boolean,
		flag: func(p *Params) *bool { return &p.TaggedBufferForSolicitedDataOnly }},
	kTaskReporting:      {name: "TaskReporting", kind: kindList, flags: both | leadingOnly | irrDiscovery},
	kISCSIProtocolLevel: {name: "iSCSIProtocolLevel", kind: kindMin, flags: both | leadingOnly | irrDiscovery | later | numeric, max: 31, def: protocolLevel},
	kIFMarker:           {name: "IFMarker", kind: kindObsolete, flags: both | irrWithRDMA},
	kOFMarker:           {name: "OFMarker", kind: kindObsolete, flags: both | irrWithRDMA},
	kIFMarkInt:          {name: "IFMarkInt", kind: kindObsoleteInt, flags: both},
	kOFMarkInt:          {name: "OFMarkInt", kind: kindObsoleteInt, flags: both},
	kSendTargets:        {name: "SendTargets", kind: kindFFPOnly, flags: fromInitiator},
	kNodeArchitecture:   {name: "X#NodeArchitecture", kind: kindDeclarative, flags: both | leadingOnly},
}

// protocolLevel is the iSCSIProtocolLevel of RFC 7143 (RFC 7144 section
// 7.1.1, RFC 7143 section 13.24).
const protocolLevel = 1

var keyIndex = func() map[string]int {
	m := make(map[string]int, numKeys)
	for i := range keyTable {
		m[keyTable[i].name] = i
	}
	return m
}()

// lookupKey returns the index of a key of keyTable, or -1.
func lookupKey(name string) int {
	if i, ok := keyIndex[name]; ok {
		return i
	}
	return -1
}

// reserved reports whether v is one of the constants that section 6.2 bars
// from proposals and declarations.
func reserved(v string) bool {
	return v == valReject || v == valIrrelevant || v == valNotUnderstood
}

// parseNumber parses a numerical-value (section 6.1): a decimal-constant
// (the digit 0, or digits starting with a non-zero digit) or a hex-constant
// ("0x" or "0X" and one or more hex digits), less than 2**64.
func parseNumber(v string) (uint64, error) {
	if len(v) > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') {
		digits := strings.TrimLeft(v[2:], "0")
		if len(digits) > 16 {
			return 0, fmt.Errorf("hex-constant above 2**64-1")
		}
		for i := 2; i < len(v); i++ {
			if !isHex(v[i]) {
				return 0, fmt.Errorf("not a hex-constant")
			}
		}
		if digits == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(digits, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("not a hex-constant")
		}
		return n, nil
	}
	if v == "" {
		return 0, fmt.Errorf("empty value")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, fmt.Errorf("not a numerical-value")
		}
	}
	if len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("decimal-constant with a leading zero")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decimal-constant above 2**64-1")
	}
	return n, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseBool parses a boolean-value (section 6.1): exactly "Yes" or "No".
func parseBool(v string) (bool, bool) {
	switch v {
	case valYes:
		return true, true
	case valNo:
		return false, true
	}
	return false, false
}

func boolValue(b bool) string {
	if b {
		return valYes
	}
	return valNo
}

// checkNumber parses v as the numerical value of key d and checks its
// range.
func (d *keyDef) checkNumber(v string) (uint64, error) {
	n, err := parseNumber(v)
	if err != nil {
		return 0, err
	}
	if n == 0 && d.has(zeroOK) {
		return 0, nil
	}
	if n < d.min || n > d.max {
		if d.has(zeroOK) {
			return 0, fmt.Errorf("outside 0 or %d to %d", d.min, d.max)
		}
		return 0, fmt.Errorf("outside %d to %d", d.min, d.max)
	}
	return n, nil
}

// decodeBinary decodes a binary-value encoded as a hex-constant or a
// base64-constant (section 6.1), as CHAP_C and CHAP_R are (section
// 12.1.3). A hex-constant of n digits is (n+1)/2 octets long.
func decodeBinary(v string) ([]byte, error) {
	if len(v) < 3 || v[0] != '0' {
		return nil, fmt.Errorf("not a hex-constant (0x...) or base64-constant (0b...)")
	}
	body := v[2:]
	switch v[1] {
	case 'x', 'X':
		if len(body)%2 == 1 {
			body = "0" + body
		}
		b, err := hex.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("not a hex-constant")
		}
		return b, nil
	case 'b', 'B':
		if b, err := base64.StdEncoding.DecodeString(body); err == nil {
			return b, nil
		}
		if b, err := base64.RawStdEncoding.DecodeString(body); err == nil {
			return b, nil
		}
		return nil, fmt.Errorf("not a base64-constant")
	}
	return nil, fmt.Errorf("not a hex-constant (0x...) or base64-constant (0b...)")
}

// encodeHex encodes b as a hex-constant.
func encodeHex(b []byte) string { return "0x" + hex.EncodeToString(b) }

// maxNameLen is the longest iSCSI name in octets (section 4.2.7.1).
const maxNameLen = 223

// checkName checks an iSCSI-name-value (sections 4.2.7 and 13.4): 1 to 223
// octets of UTF-8 with an "iqn.", "eui." or "naa." type designator; "eui."
// takes 16 hex digits, "naa." 16 or 32. ASCII characters other than
// letters, digits, '-', '.', ':' and '_' are refused (the stringprep
// profile of RFC 3722 leaves none of them, and none of them can be part of
// a key=value pair).
func checkName(s string) error {
	if s == "" {
		return fmt.Errorf("empty iSCSI name")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("iSCSI name longer than %d octets", maxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("iSCSI name is not UTF-8")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == ':', c == '_':
		default:
			return fmt.Errorf("iSCSI name has the character %q", c)
		}
	}
	if len(s) < 5 {
		return fmt.Errorf("iSCSI name without type designator and body")
	}
	hexBody := func(n ...int) error {
		body := s[4:]
		for _, want := range n {
			if len(body) == want {
				for i := 0; i < len(body); i++ {
					if !isHex(body[i]) {
						return fmt.Errorf("%s name with a non-hex digit", s[:3])
					}
				}
				return nil
			}
		}
		return fmt.Errorf("%s name of %d hex digits", s[:3], len(body))
	}
	switch strings.ToLower(s[:4]) {
	case "iqn.":
		return nil
	case "eui.":
		return hexBody(16)
	case "naa.":
		return hexBody(16, 32)
	}
	return fmt.Errorf("iSCSI name without iqn., eui. or naa. type designator")
}

// checkLocalName checks an iSCSI-local-name-value (section 6.1, aliases):
// UTF-8 without NUL (the text codec refuses NUL already).
func checkLocalName(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	return nil
}

// maxQuote bounds the values quoted in error reasons.
const maxQuote = 64

// quote formats a key's value for an error reason, shortened to maxQuote
// octets.
func quote(v string) string {
	if len(v) > maxQuote {
		return strconv.Quote(v[:maxQuote]) + "..."
	}
	return strconv.Quote(v)
}

// kv formats key=value for an error reason.
func kv(key, value string) string { return key + "=" + quote(value) }
