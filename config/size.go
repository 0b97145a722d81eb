package config

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Size is a quantity of octets: a LUN's size or a memory LUN's memory.
//
// In YAML it is an integer count of octets (1073741824) or a number with a
// binary unit: B, KiB, MiB, GiB or TiB (1GiB, 1536MiB, 1 GiB). A fraction
// (1.5GiB) is allowed when it comes to a whole number of 512-octet blocks.
// Decimal units (GB, MB) are not accepted: they would be ambiguous.
type Size int64

// The binary units a Size is written in.
const (
	KiB Size = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// BlockSize is the block size of every LUN: LUN sizes are whole multiples of it.
const BlockSize = 512

// units are the accepted unit suffixes, largest first.
var units = []struct {
	name string
	size Size
}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// unitHints maps units people write by habit (lower-cased) to what to write.
var unitHints = map[string]string{
	"k": "KiB", "kb": "KiB", "kib": "KiB", "ki": "KiB",
	"m": "MiB", "mb": "MiB", "mib": "MiB", "mi": "MiB",
	"g": "GiB", "gb": "GiB", "gib": "GiB", "gi": "GiB",
	"t": "TiB", "tb": "TiB", "tib": "TiB", "ti": "TiB",
	"byte": "B", "bytes": "B", "octet": "B", "octets": "B",
}

// ParseSize reads a size written as in YAML: a number of octets or a number
// with a unit (B, KiB, MiB, GiB, TiB), optionally separated by one space.
// It is what the YAML decoding and Size.Set use.
func ParseSize(s string) (Size, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%q is not a size%s", clip(s), fmt.Sprintf(format, args...))
	}
	generic := func() error { return bad(" (use a number with KiB, MiB, GiB or TiB)") }
	if len(s) > 64 {
		return 0, bad(": too long")
	}
	if strings.HasPrefix(s, "-") {
		return 0, bad(": sizes cannot be negative")
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	whole := s[:i]
	if whole == "" {
		return 0, generic()
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		frac, i = s[i+1:j], j
		if frac == "" {
			return 0, generic()
		}
	}
	unitText := s[i:]
	if rest, ok := strings.CutPrefix(unitText, " "); ok && rest != "" {
		unitText = rest
	}
	unit := Size(0)
	for _, u := range units {
		if unitText == u.name {
			unit = u.size
		}
	}
	if unitText == "" {
		unit = 1
	}
	if unit == 0 {
		lower := strings.ToLower(unitText)
		if hint, ok := unitHints[lower]; ok {
			return 0, bad(": the unit is %s (binary units only: KiB, MiB, GiB, TiB)", hint)
		}
		switch lower {
		case "p", "pb", "pib", "e", "eb", "eib":
			return 0, bad(": the largest unit is TiB (1PiB is 1024TiB)")
		}
		return 0, generic()
	}
	if frac == "" && len(whole) <= 18 { // the usual case, without big numbers
		v, _ := strconv.ParseInt(whole, 10, 64) // at most 18 digits: fits
		if v > math.MaxInt64/int64(unit) {
			return 0, bad(": too large (sizes are at most 2^63-1 octets)")
		}
		return Size(v) * unit, nil
	}
	// value = (whole.frac) * unit, computed exactly.
	num, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return 0, generic()
	}
	num.Mul(num, big.NewInt(int64(unit)))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() != 0 || (frac != "" && new(big.Int).Rem(q, big.NewInt(BlockSize)).Sign() != 0) {
		return 0, bad(": a fraction must come to a whole number of %d-octet blocks", BlockSize)
	}
	if !q.IsInt64() {
		return 0, bad(": too large (sizes are at most 2^63-1 octets)")
	}
	return Size(q.Int64()), nil
}

// sizeOfNode reads a Size from a YAML scalar: an integer is octets, a string
// goes through ParseSize.
func sizeOfNode(n *yaml.Node) (Size, error) {
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			if !digits(strings.TrimLeft(n.Value, "+-")) {
				return 0, fmt.Errorf("%q is not a size (use whole octets, or a number with KiB, MiB, GiB or TiB)", clip(n.Value)) // !!int abc
			}
			return 0, tooLarge(n.Value)
		}
		if v < 0 {
			return 0, fmt.Errorf("%d is not a size: sizes cannot be negative", v)
		}
		return Size(v), nil
	case "!!str":
		return ParseSize(n.Value)
	case "!!float":
		if digits(strings.TrimLeft(n.Value, "+-")) { // an integer too large for int64
			return 0, tooLarge(n.Value)
		}
	}
	return 0, fmt.Errorf("%s is not a size (use whole octets, or a number with KiB, MiB, GiB or TiB)", describe(n))
}

// tooLarge is the defect of an integer beyond int64.
func tooLarge(v string) error {
	if strings.HasPrefix(v, "-") {
		return fmt.Errorf("%s is not a size: sizes cannot be negative", clip(v))
	}
	return fmt.Errorf("%s is not a size: too large (sizes are at most 2^63-1 octets)", clip(v))
}

// String writes s in the largest unit that represents it exactly: 1GiB,
// 1536MiB, 1000B.
func (s Size) String() string {
	sign, u := "", uint64(s)
	if s < 0 {
		sign, u = "-", -u
	}
	for _, unit := range units {
		if u%uint64(unit.size) == 0 && (u != 0 || unit.size == 1) {
			return sign + strconv.FormatUint(u/uint64(unit.size), 10) + unit.name
		}
	}
	panic("unreachable")
}

// Set parses a size, so that a *Size is a flag.Value.
func (s *Size) Set(text string) error {
	v, err := ParseSize(text)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes s as String does. A negative size is an error.
func (s Size) MarshalYAML() (any, error) {
	if s < 0 {
		return nil, fmt.Errorf("config: the size %s is negative", s)
	}
	return s.String(), nil
}

// UnmarshalYAML reads a size as ParseSize does, or an integer of octets.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a size, found %s", n.Line, describe(n))
	}
	v, err := sizeOfNode(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}
