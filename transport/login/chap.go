package login

import (
	"bytes"
	"crypto/md5"
	"crypto/subtle"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// CHAP holds CHAP credentials (section 12.1.3, RFC 1994). User and Secret
// authenticate the initiator to the target: an initiator sends them, a
// target requires them. MutualUser and MutualSecret authenticate the target
// to the initiator: an initiator with them set requires the target to
// authenticate (and then offers only AuthMethod=CHAP), a target with them
// set can answer an initiator's challenge. Empty Mutual* means one-way CHAP.
//
// Section 9.2.1 asks for secrets of at least 96 bits (12 octets) unless
// IPsec protects the connection. Shorter secrets are accepted here without
// an error: whether the RDMA fabric is trusted is the deployment's call.
// The same secret for both directions is refused (section 9.2.1: "Any CHAP
// secret used for initiator authentication MUST NOT be configured for
// authentication of any target").
type CHAP struct{ User, Secret, MutualUser, MutualSecret string }

// CHAP parameters of this implementation.
const (
	chapMD5 = 5 // CHAP_A: the only algorithm, CHAP with MD5 (section 12.1.3)
	// ChallengeLen is the length of the CHAP challenges this package sends
	// and the least it accepts, in octets.
	ChallengeLen = 16
)

// validate checks the credentials; what names the configuration item.
func (c *CHAP) validate(what string) error {
	if c.User == "" || c.Secret == "" {
		return fmt.Errorf("%w: %s CHAP needs User and Secret", ErrConfig, what)
	}
	if (c.MutualUser == "") != (c.MutualSecret == "") {
		return fmt.Errorf("%w: %s CHAP needs both MutualUser and MutualSecret, or neither", ErrConfig, what)
	}
	if c.MutualSecret != "" && c.MutualSecret == c.Secret {
		return fmt.Errorf("%w: %s CHAP uses the same secret in both directions (section 9.2.1)", ErrConfig, what)
	}
	for _, n := range []string{c.User, c.MutualUser} {
		if len(n) > 255 || strings.IndexByte(n, 0) >= 0 {
			return fmt.Errorf("%w: %s CHAP name %s is not a text-value of at most 255 octets", ErrConfig, what, quote(n))
		}
	}
	return nil
}

func (c *CHAP) mutual() bool { return c.MutualSecret != "" }

// chapResponse is the CHAP Response Value of RFC 1994 section 4.1: MD5 over
// the Identifier, the secret and the Challenge Value.
func chapResponse(id byte, secret string, challenge []byte) []byte {
	h := md5.New()
	h.Write([]byte{id})
	h.Write([]byte(secret))
	h.Write(challenge)
	return h.Sum(nil)
}

// newChallenge reads a CHAP Identifier and a ChallengeLen-octet challenge
// from r, drawing again if the challenge equals avoid (section 9.2.1:
// "Originators MUST NOT reuse the CHAP challenge sent by the responder").
func newChallenge(r io.Reader, avoid []byte) (byte, []byte, error) {
	buf := make([]byte, 1+ChallengeLen)
	for range 4 {
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, nil, fmt.Errorf("reading a CHAP challenge: %v", err)
		}
		if !bytes.Equal(buf[1:], avoid) {
			return buf[0], buf[1:], nil
		}
	}
	return 0, nil, fmt.Errorf("the random source keeps producing the peer's CHAP challenge")
}

// parseCHAPI parses a CHAP_I value: a number from 0 to 255.
func parseCHAPI(v string) (byte, error) {
	n, err := parseNumber(v)
	if err != nil {
		return 0, err
	}
	if n > 255 {
		return 0, fmt.Errorf("outside 0 to 255")
	}
	return byte(n), nil
}

// parseChallenge decodes a CHAP_C value and checks its length: at least
// ChallengeLen octets (a shorter challenge is refused as too weak) and at
// most 1024 (section 12.1.3).
func parseChallenge(v string) ([]byte, error) {
	c, err := decodeBinary(v)
	if err != nil {
		return nil, err
	}
	if len(c) > maxBinary {
		return nil, fmt.Errorf("longer than %d octets (section 12.1.3)", maxBinary)
	}
	return c, nil
}

// chapTarget is the target's side of CHAP (section 12.1.3):
//
//	I-> CHAP_A=<A1,A2...>
//	T-> CHAP_A=<A> CHAP_I=<I> CHAP_C=<C>
//	I-> CHAP_N=<N> CHAP_R=<R> [CHAP_I=<I> CHAP_C=<C>]
//	T-> [CHAP_N=<N> CHAP_R=<R>]
type chapTarget struct {
	cred      *CHAP
	rand      io.Reader
	state     uint8
	id        byte
	challenge []byte
}

const (
	chapWantAlgorithm = iota
	chapWantResponse
	chapDone
)

// step consumes the CHAP keys of one logical text data segment (keys maps
// a key index to its value) and returns the keys to answer. Failures carry
// the status section 9.2 asks for: Missing Parameter for an absent key,
// Initiator Error for a malformed one, Authentication Failure for a wrong
// response.
func (c *chapTarget) step(keys map[int]string, selectedNow bool) ([]pair, *negError) {
	has := func(i int) bool { _, ok := keys[i]; return ok }
	switch c.state {
	case chapWantAlgorithm:
		for _, i := range []int{kCHAPI, kCHAPC, kCHAPN, kCHAPR} {
			if has(i) {
				return nil, nerr(StatusInitiatorError, "%s before the target's challenge: the initiator's first CHAP step is CHAP_A (section 12.1.3)", keyTable[i].name)
			}
		}
		a, ok := keys[kCHAPA]
		if !ok {
			if selectedNow {
				return nil, nil // the initiator sends CHAP_A in its next request
			}
			return nil, nerr(StatusMissingParameter, "CHAP_A missing: the initiator's first CHAP step is CHAP_A (section 12.1.3)")
		}
		supported := false
		for _, e := range strings.Split(a, ",") {
			n, err := parseNumber(e)
			if err != nil {
				return nil, nerr(StatusInitiatorError, "%s: %q: %v", kv("CHAP_A", a), e, err)
			}
			supported = supported || n == chapMD5
		}
		if !supported {
			return nil, nerr(StatusAuthFailure, "%s: this target supports only 5 (CHAP with MD5, section 12.1.3)", kv("CHAP_A", a))
		}
		id, ch, err := newChallenge(c.rand, nil)
		if err != nil {
			return nil, nerr(StatusTargetError, "%v", err)
		}
		c.id, c.challenge, c.state = id, ch, chapWantResponse
		return []pair{
			{"CHAP_A", strconv.Itoa(chapMD5)},
			{"CHAP_I", strconv.Itoa(int(id))},
			{"CHAP_C", encodeHex(ch)},
		}, nil
	case chapWantResponse:
		if has(kCHAPA) {
			return nil, nerr(StatusInitiatorError, "CHAP_A after the algorithm was chosen (section 12.1.3)")
		}
		name, okN := keys[kCHAPN]
		r, okR := keys[kCHAPR]
		if !okN || !okR {
			// Section 9.2: a missing CHAP_R is "Missing Parameter", which
			// is what defeats the reflection attack described there.
			return nil, nerr(StatusMissingParameter, "CHAP_N and CHAP_R are required in answer to the challenge (sections 9.2, 12.1.3)")
		}
		resp, err := decodeBinary(r)
		if err != nil {
			return nil, nerr(StatusInitiatorError, "%s: %v", kv("CHAP_R", r), err)
		}
		if name != c.cred.User {
			return nil, nerr(StatusAuthFailure, "%s is not the CHAP user configured for this target", kv("CHAP_N", name))
		}
		if c.cred.mutual() && subtle.ConstantTimeCompare(resp, chapResponse(c.id, c.cred.MutualSecret, c.challenge)) == 1 {
			return nil, nerr(StatusAuthFailure, "CHAP_R was computed with the target's own secret (section 9.2.1)")
		}
		if subtle.ConstantTimeCompare(resp, chapResponse(c.id, c.cred.Secret, c.challenge)) != 1 {
			return nil, nerr(StatusAuthFailure, "wrong CHAP_R for %s", kv("CHAP_N", name))
		}
		ci, okI := keys[kCHAPI]
		cc, okC := keys[kCHAPC]
		c.state = chapDone
		if !okI && !okC {
			return nil, nil // one-way CHAP
		}
		if !okI || !okC {
			return nil, nerr(StatusMissingParameter, "target authentication needs both CHAP_I and CHAP_C (section 12.1.3)")
		}
		id, err := parseCHAPI(ci)
		if err != nil {
			return nil, nerr(StatusInitiatorError, "%s: %v", kv("CHAP_I", ci), err)
		}
		ch, err := parseChallenge(cc)
		if err != nil {
			return nil, nerr(StatusInitiatorError, "%s: %v", kv("CHAP_C", cc), err)
		}
		if len(ch) < ChallengeLen {
			return nil, nerr(StatusAuthFailure, "%s: a challenge of %d octets is too weak, this target needs at least %d", kv("CHAP_C", cc), len(ch), ChallengeLen)
		}
		if bytes.Equal(ch, c.challenge) {
			return nil, nerr(StatusAuthFailure, "the initiator reflected the target's CHAP_C (section 9.2.1)")
		}
		if !c.cred.mutual() {
			return nil, nerr(StatusAuthFailure, "the initiator asks the target to authenticate (CHAP_I, CHAP_C), but no mutual CHAP credentials are configured")
		}
		return []pair{
			{"CHAP_N", c.cred.MutualUser},
			{"CHAP_R", encodeHex(chapResponse(id, c.cred.MutualSecret, ch))},
		}, nil
	}
	if len(keys) > 0 {
		return nil, nerr(StatusInitiatorError, "%s after CHAP completed (section 12.1.3)", keyTable[firstKey(keys)].name)
	}
	return nil, nil
}

// chapInitiator is the initiator's side of CHAP (section 12.1.3).
type chapInitiator struct {
	cred      *CHAP
	rand      io.Reader
	state     uint8
	id        byte
	challenge []byte
}

const (
	chapISendAlgorithm = iota // AuthMethod=CHAP chosen, CHAP_A to send
	chapIWantChallenge        // CHAP_A sent
	chapIWantTarget           // CHAP_R sent with our challenge, the target's CHAP_N/CHAP_R due
	chapIDone
)

// step consumes the CHAP keys of one Login Response and returns the keys of
// the next Login Request. Errors are ProtocolErrors.
func (c *chapInitiator) step(keys map[int]string) ([]pair, error) {
	has := func(i int) bool { _, ok := keys[i]; return ok }
	switch c.state {
	case chapISendAlgorithm:
		if len(keys) > 0 {
			return nil, protoErr("%s before CHAP_A was sent (section 12.1.3)", keyTable[firstKey(keys)].name)
		}
		c.state = chapIWantChallenge
		return []pair{{"CHAP_A", strconv.Itoa(chapMD5)}}, nil
	case chapIWantChallenge:
		if has(kCHAPN) || has(kCHAPR) {
			return nil, protoErr("CHAP_N or CHAP_R before the initiator answered the challenge (section 12.1.3)")
		}
		a, okA := keys[kCHAPA]
		ci, okI := keys[kCHAPI]
		cc, okC := keys[kCHAPC]
		if !okA && !okI && !okC {
			return nil, nil // not yet
		}
		if !okA || !okI || !okC {
			return nil, protoErr("the target must answer CHAP_A with CHAP_A, CHAP_I and CHAP_C together (section 12.1.3)")
		}
		if n, err := parseNumber(a); err != nil || n != chapMD5 {
			return nil, protoErr("%s: only 5 was offered (section 12.1.3)", kv("CHAP_A", a))
		}
		id, err := parseCHAPI(ci)
		if err != nil {
			return nil, protoErr("%s: %v", kv("CHAP_I", ci), err)
		}
		ch, err := parseChallenge(cc)
		if err != nil {
			return nil, protoErr("%s: %v", kv("CHAP_C", cc), err)
		}
		if len(ch) < ChallengeLen {
			return nil, protoErr("%s: a challenge of %d octets is too weak, at least %d are needed", kv("CHAP_C", cc), len(ch), ChallengeLen)
		}
		out := []pair{
			{"CHAP_N", c.cred.User},
			{"CHAP_R", encodeHex(chapResponse(id, c.cred.Secret, ch))},
		}
		if !c.cred.mutual() {
			c.state = chapIDone
			return out, nil
		}
		myID, mine, err := newChallenge(c.rand, ch)
		if err != nil {
			return nil, &ProtocolError{Err: ErrConfig, Reason: err.Error()}
		}
		c.id, c.challenge, c.state = myID, mine, chapIWantTarget
		return append(out, pair{"CHAP_I", strconv.Itoa(int(myID))}, pair{"CHAP_C", encodeHex(mine)}), nil
	case chapIWantTarget:
		if has(kCHAPA) || has(kCHAPI) || has(kCHAPC) {
			return nil, protoErr("CHAP_A, CHAP_I or CHAP_C after the challenge was answered (section 12.1.3)")
		}
		name, okN := keys[kCHAPN]
		r, okR := keys[kCHAPR]
		if !okN && !okR {
			return nil, nil
		}
		if !okN || !okR {
			return nil, authErr("the target must send CHAP_N and CHAP_R together (section 12.1.3)")
		}
		if name != c.cred.MutualUser {
			return nil, authErr("%s is not the target's configured CHAP name", kv("CHAP_N", name))
		}
		resp, err := decodeBinary(r)
		if err != nil {
			return nil, authErr("%s: %v", kv("CHAP_R", r), err)
		}
		if subtle.ConstantTimeCompare(resp, chapResponse(c.id, c.cred.Secret, c.challenge)) == 1 {
			return nil, authErr("the target's CHAP_R was computed with the initiator's secret (section 9.2.1)")
		}
		if subtle.ConstantTimeCompare(resp, chapResponse(c.id, c.cred.MutualSecret, c.challenge)) != 1 {
			return nil, authErr("wrong CHAP_R from target %s", kv("CHAP_N", name))
		}
		c.state = chapIDone
		return nil, nil
	}
	if len(keys) > 0 {
		names := make([]string, 0, len(keys))
		for i := range keys {
			names = append(names, keyTable[i].name)
		}
		slices.Sort(names)
		return nil, protoErr("%s after CHAP completed (section 12.1.3)", strings.Join(names, ", "))
	}
	return nil, nil
}

func protoErr(format string, args ...any) *ProtocolError {
	return &ProtocolError{Err: ErrProtocol, Reason: fmt.Sprintf(format, args...)}
}

func authErr(format string, args ...any) *ProtocolError {
	return &ProtocolError{Err: ErrTargetAuthentication, Reason: fmt.Sprintf(format, args...)}
}
