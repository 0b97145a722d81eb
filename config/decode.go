package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// This file is the strict reader shared by the target and initiator
// configurations: it parses a file into yaml.Node trees and walks them against
// a schema, so every defect has a line (and, inside flow collections, a column)
// and a field path. yaml.v3 is used only as a parser: its decoder would accept
// duplicate keys in some places, stop at the first error and lose positions.

// maxVisits bounds how many nodes one parse visits, counting each expansion of
// an alias again, so that a small file of nested aliases cannot make the walk
// (and the Target it yields) explode.
const maxVisits = 1 << 20

// decoder walks one document and collects its defects.
type decoder struct {
	errs
	flow   map[*yaml.Node]bool // nodes written inside a flow collection: their errors carry a column
	visits int
	over   bool   // maxVisits exceeded: the walk has been abandoned
	needs  string // what a configuration holds at least, for the messages about empty files
}

func newDecoder(file string) *decoder {
	if file == "" {
		file = "config"
	}
	return &decoder{errs: errs{file: file}, flow: map[*yaml.Node]bool{}, needs: "a targets list"}
}

// errorf records a defect at node n (nil: the whole file).
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line = n.Line
		if d.flow[n] {
			col = n.Column
		}
	}
	d.add(line, col, path, format, args...)
}

// document parses data, which must hold exactly one YAML document, and returns
// its root node, or nil after recording why there is none.
func (d *decoder) document(data []byte) *yaml.Node {
	docs, err := parseAll(data)
	if err != nil {
		line := syntaxLine(data, err)
		d.add(line, 0, "", "%s", syntaxMessage(data, line, err))
		return nil
	}
	if len(docs) == 0 {
		if len(bytes.TrimSpace(data)) == 0 {
			d.add(1, 0, "", "the file is empty: a configuration needs at least %s", d.needs)
		} else {
			d.add(1, 0, "", "the file has no YAML content (only comments): a configuration needs at least %s", d.needs)
		}
		return nil
	}
	if len(docs) > 1 {
		d.add(docs[1].Line, 0, "", "a second YAML document starts here: a configuration file holds one document (remove the ---)")
		return nil
	}
	doc := docs[0]
	if len(doc.Content) != 1 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null" {
		line := doc.Line
		if len(doc.Content) == 1 && doc.Content[0].Value != "" { // a written ~ or null, not nothing
			line = doc.Content[0].Line
		}
		d.add(max(line, 1), 0, "", "the document is empty: a configuration needs at least %s", d.needs)
		return nil
	}
	root := doc.Content[0]
	d.markFlow(root, false)
	return root
}

// parseAll parses every document in data. yaml.v3 has panicked on malformed
// input in the past; a panic becomes an error here.
func parseAll(data []byte) (docs []*yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the YAML parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err == io.EOF {
			return docs, nil
		} else if err != nil {
			return nil, err
		}
		docs = append(docs, &doc)
	}
}

// syntaxLine finds the line of a YAML syntax error. yaml.v3's messages do not
// say reliably: some have no line, some give the line where the enclosing
// construct began. The answer here is the first line whose prefix of the file
// fails with the same message, that is, the line where reading goes wrong.
func syntaxLine(data []byte, err error) int {
	want := stripLine(err.Error())
	ends := lineEnds(data)
	fails := func(i int) bool {
		_, err := parseAll(data[:ends[i]])
		return err != nil && stripLine(err.Error()) == want
	}
	if len(ends) <= 2000 {
		for i := range ends {
			if fails(i) {
				return i + 1
			}
		}
		return len(ends)
	}
	return sort.Search(len(ends), fails) + 1
}

// stripLine removes yaml.v3's "yaml: " and "line N: " prefixes.
func stripLine(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				msg = rest[i+2:]
			}
		}
	}
	return msg
}

// syntaxMessage words a syntax error, with a hint for the usual causes.
func syntaxMessage(data []byte, line int, err error) string {
	msg := "YAML syntax: " + stripLine(err.Error())
	text := lineText(data, line)
	switch {
	case strings.HasPrefix(strings.TrimLeft(text, " "), "\t"):
		msg += " (a tab indents this line: YAML indents with spaces only)"
	case strings.Contains(msg, "mapping values are not allowed"):
		msg += " (a value holding \": \" must be quoted)"
	case strings.Contains(msg, "control characters"):
		msg += " (write them as escapes inside double quotes)"
	case strings.Contains(msg, "unexpected end of stream"):
		msg += " (is a quote opened on this line left unclosed?)"
	case strings.Contains(msg, "did not find expected ',' or"):
		msg += " (is a { or [ opened on this line left unclosed?)"
	}
	return msg
}

// lineEnds returns where each line of data ends: ends[i] is the length of
// the prefix holding lines 1..i+1, line break included. Line breaks are
// YAML's: LF, CR LF, CR, NEL, LS and PS.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			ends = append(ends, i+1)
		case data[i] == '\n' || data[i] == '\r':
			ends = append(ends, i+1)
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			i++
			ends = append(ends, i+1)
		case bytes.HasPrefix(data[i:], []byte("\u2028")) || bytes.HasPrefix(data[i:], []byte("\u2029")):
			i += 2
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// lineText returns line n (1-based) of data, without its line break.
func lineText(data []byte, n int) string {
	ends := lineEnds(data)
	if n < 1 || n > len(ends) {
		return ""
	}
	start := 0
	if n > 1 {
		start = ends[n-2]
	}
	return strings.TrimRight(string(data[start:ends[n-1]]), "\r\n\u0085\u2028\u2029")
}

// markFlow records which nodes are written inside flow collections ({...},
// [...]), where several fields share a line and a column is worth printing.
// Aliases are not followed: each node is visited once.
func (d *decoder) markFlow(n *yaml.Node, inFlow bool) {
	inFlow = inFlow || n.Style&yaml.FlowStyle != 0
	if inFlow {
		d.flow[n] = true
	}
	for _, c := range n.Content {
		d.markFlow(c, inFlow)
	}
}

// resolve follows aliases and counts the visit against maxVisits.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.visits++
	if d.visits > maxVisits && !d.over {
		d.over = true
		d.add(0, 0, "", "the configuration expands to more than %d YAML nodes (through aliases): it is not a plausible configuration", maxVisits)
	}
	return n
}

// field is one key of a mapping and its value.
type field struct{ key, val *yaml.Node }

// fields are the known keys of one mapping.
type fields map[string]field

// has reports whether the mapping had the key.
func (f fields) has(name string) bool { _, ok := f[name]; return ok }

// mapping checks that n is a mapping whose keys are distinct names among
// allowed, and returns its fields. what names the object in messages ("a LUN").
// Unknown and duplicate keys are reported and left out; the others are still
// returned, so their values get checked too.
func (d *decoder) mapping(n *yaml.Node, path, what string, allowed []string) (fields, bool) {
	n = d.resolve(n)
	if d.over {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping (%s: %s), found %s", what, strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	out := fields{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "a key must be a field name, found %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorf(k, path, "merge keys (<<) are not supported: write the fields out (an alias may stand for a whole mapping)")
			continue
		}
		name := k.Value
		if f, dup := out[name]; dup {
			d.errorf(k, path, "duplicate field %q (first at %s)", name, d.pos(f.key))
			continue
		}
		if !slices.Contains(allowed, name) {
			msg := fmt.Sprintf("unknown field %q", clip(name))
			if s := suggest(name, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errorf(k, path, "%s; the fields of %s are %s", msg, what, list(allowed, "and"))
			out[name] = field{key: k} // remembered for the duplicate check only
			continue
		}
		out[name] = field{key: k, val: v}
	}
	for name, f := range out {
		if f.val == nil {
			delete(out, name)
		}
	}
	return out, true
}

// pos words where node n is, for "first at ..." references: its line, and
// its column when it is inside a flow collection.
func (d *decoder) pos(n *yaml.Node) string {
	if d.flow[n] {
		return fmt.Sprintf("line %d, column %d", n.Line, n.Column)
	}
	return fmt.Sprintf("line %d", n.Line)
}

// missing reports a required field that is absent from the mapping at n.
func (d *decoder) missing(n *yaml.Node, path, name, why string) {
	d.errorf(d.resolve(n), join(path, name), "missing: %s", why)
}

// sequence checks that f's value is a list and returns its items.
func (d *decoder) sequence(f field, path, of string) ([]*yaml.Node, bool) {
	n := d.resolve(f.val)
	if d.over {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list of %s, found %s", of, describe(n))
		return nil, false
	}
	return n.Content, true
}

// scalar checks that f's value is a plain scalar with a value and returns it.
func (d *decoder) scalar(f field, path, want string) (*yaml.Node, bool) {
	n := d.resolve(f.val)
	if d.over {
		return nil, false
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected %s, found %s", want, describe(n))
		return nil, false
	}
	switch n.ShortTag() {
	case "!!null":
		d.errorf(n, path, "no value: expected %s", want)
		return nil, false
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
		return n, true
	}
	d.errorf(n, path, "the tag %s is not supported: expected %s", n.Tag, want)
	return nil, false
}

// str returns f's value as text. A number or boolean is taken as written
// (a secret of digits needs no quotes); lists, mappings and empty values are
// errors, and so are empty strings and unprintable characters.
func (d *decoder) str(f field, path, want string) (string, bool) {
	n, ok := d.scalar(f, path, want)
	if !ok {
		return "", false
	}
	if n.Value == "" {
		d.errorf(n, path, "empty: expected %s", want)
		return "", false
	}
	if r, bad := unprintable(n.Value); bad {
		d.errorf(n, path, "contains the unprintable character %U: expected %s", r, want)
		return "", false
	}
	return n.Value, true
}

// unprintable returns the first rune of s that is not printable (a control
// character, a line break, a non-ASCII space, invalid UTF-8).
func unprintable(s string) (rune, bool) {
	if !utf8.ValidString(s) { // the YAML parser lets no invalid UTF-8 through; this is a guard
		return utf8.RuneError, true
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return r, true
		}
	}
	return 0, false
}

// integer returns f's value, which must be a YAML integer in lo..hi. what
// names the quantity in the range message.
func (d *decoder) integer(f field, path, what string, lo, hi int64) (int64, bool) {
	return d.integerHint(f, path, what, lo, hi, "")
}

// integerHint is integer with a hint appended to the range message.
func (d *decoder) integerHint(f field, path, what string, lo, hi int64, hint string) (int64, bool) {
	n, ok := d.scalar(f, path, "an integer")
	if !ok {
		return 0, false
	}
	if n.ShortTag() == "!!float" && digits(strings.TrimPrefix(n.Value, "-")) {
		d.errorf(n, path, "%s is out of range (%d..%d)%s", clip(n.Value), lo, hi, hint) // too long for an integer
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		d.errorf(n, path, "%s is not an integer%s", describe(n), quotedHint(n, "!!int"))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		if digits(strings.TrimLeft(n.Value, "+-")) {
			d.errorf(n, path, "%s is out of range (%d..%d)%s", clip(n.Value), lo, hi, hint)
		} else {
			d.errorf(n, path, "%q is not an integer", clip(n.Value)) // !!int abc
		}
		return 0, false
	}
	if v < lo || v > hi {
		d.errorf(n, path, "%s %d is out of range (%d..%d)%s", what, v, lo, hi, hint)
		return 0, false
	}
	return v, true
}

// boolean returns f's value, which must be true or false.
func (d *decoder) boolean(f field, path string) (bool, bool) {
	n, ok := d.scalar(f, path, "true or false")
	if !ok {
		return false, false
	}
	var v bool
	if n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		d.errorf(n, path, "%s is not a boolean (use true or false)%s", describe(n), quotedHint(n, "!!bool"))
		return false, false
	}
	return v, true
}

// size returns f's value as a Size: integer octets or a number with a unit.
func (d *decoder) size(f field, path string) (Size, bool) {
	n, ok := d.scalar(f, path, "a size")
	if !ok {
		return 0, false
	}
	s, err := sizeOfNode(n)
	if err != nil {
		d.errorf(n, path, "%s", err.Error())
		return 0, false
	}
	return s, true
}

// sizeIn returns f's value as a Size in lo..hi and a whole multiple of unit
// (lo and hi are multiples of unit). what names the quantity in messages;
// hint is appended to the range message.
func (d *decoder) sizeIn(f field, path, what string, lo, hi, unit Size, hint string) (Size, bool) {
	s, ok := d.size(f, path)
	if !ok {
		return 0, false
	}
	n := d.resolve(f.val)
	switch {
	case s < lo || s > hi:
		d.errorf(n, path, "%s %s is out of range (%s..%s)%s", what, s, lo, hi, hint)
	case s%unit != 0:
		down := s - s%unit // lo <= down < s < down+unit <= hi
		d.errorf(n, path, "%s %s is not a multiple of %s (use %s or %s)", what, s, unit, down, down+unit)
	default:
		return s, true
	}
	return 0, false
}

// iscsiName returns f's value, which must be an iSCSI name (CheckISCSIName),
// and its node, or ok false after recording the defect.
func (d *decoder) iscsiName(f field, path string) (name string, n *yaml.Node, ok bool) {
	s, ok := d.str(f, path, "an iSCSI name")
	if !ok {
		return "", nil, false
	}
	n = d.resolve(f.val)
	if err := CheckISCSIName(s); err != nil {
		d.errorf(n, path, "%v", err)
		return "", n, false
	}
	return s, n, true
}

// duration returns f's value, a Go duration (time.ParseDuration: 500ms, 30s,
// 1m30s, 1h) in lo..hi. what names the quantity in messages. With off set,
// 0 is accepted too, and off says what it does ("turns keepalive off").
// A bare number is refused: 30 could mean seconds or nanoseconds.
func (d *decoder) duration(f field, path, what string, lo, hi time.Duration, off string) (time.Duration, bool) {
	n, ok := d.scalar(f, path, "a duration")
	if !ok {
		return 0, false
	}
	rng := formatDuration(lo) + ".." + formatDuration(hi)
	if off != "" {
		rng = "0, which " + off + ", or " + rng
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float":
	default:
		d.errorf(n, path, "%s is not a duration (write a number with a unit, as 30s)", describe(n))
		return 0, false
	}
	if n.Value == "" {
		d.errorf(n, path, "empty: expected a duration")
		return 0, false
	}
	v, err := parseDuration(n.Value)
	switch {
	case err == errDurationRange:
		d.errorf(n, path, "%s %s is out of range (%s)", what, clip(n.Value), rng)
	case err != nil:
		d.errorf(n, path, "%v", err)
	case v < 0:
		d.errorf(n, path, "%s %s is negative (%s)", what, clip(n.Value), rng)
	case v == 0 && off != "":
		return 0, true
	case v < lo || v > hi:
		d.errorf(n, path, "%s %s is out of range (%s)", what, clip(n.Value), rng)
	default:
		return v, true
	}
	return 0, false
}

// errDurationRange is a well-formed duration too large for time.Duration.
var errDurationRange = errors.New("duration out of range")

var (
	// durationSyntax is what time.ParseDuration reads, whatever the size.
	durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)
	// bareNumber is a number without a unit.
	bareNumber = regexp.MustCompile(`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)$`)
)

// durationUnitHints words the units people write by habit.
var durationUnitHints = map[string]string{
	"sec": "write s for seconds", "secs": "write s for seconds", "second": "write s for seconds", "seconds": "write s for seconds",
	"min": "write m for minutes", "mins": "write m for minutes", "minute": "write m for minutes", "minutes": "write m for minutes",
	"hr": "write h for hours", "hrs": "write h for hours", "hour": "write h for hours", "hours": "write h for hours",
	"d": "a day is 24h", "day": "a day is 24h", "days": "a day is 24h", "msec": "write ms for milliseconds",
}

// parseDuration reads a duration as time.ParseDuration does and words its
// defects; a well-formed duration beyond time.Duration is errDurationRange.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err == nil {
		return v, nil
	}
	const how = "write a number with a unit (ns, us, ms, s, m or h), as 30s, 1m30s or 500ms"
	t := strings.ReplaceAll(s, " ", "")
	if _, err := time.ParseDuration(t); err == nil && t != s {
		return 0, fmt.Errorf("%q is not a duration: write it without spaces, as %s", clip(s), clip(t))
	}
	switch {
	case bareNumber.MatchString(t):
		return 0, fmt.Errorf("%s has no unit: write %ss for seconds (units: ns, us, ms, s, m, h)", clip(t), clip(t))
	case durationSyntax.MatchString(t):
		return 0, errDurationRange
	}
	if _, err := time.ParseDuration(t); err != nil {
		if _, rest, ok := strings.Cut(err.Error(), "unknown unit "); ok {
			if unit, err := strconv.Unquote(strings.SplitN(rest, " in duration", 2)[0]); err == nil {
				hint, ok := durationUnitHints[strings.ToLower(unit)]
				if !ok {
					hint = "units: ns, us, ms, s, m, h"
					if l := strings.ToLower(unit); l != unit && strings.Contains(" ns us ms s m h ", " "+l+" ") {
						hint = "units are lower-case: write " + l
					}
				}
				return 0, fmt.Errorf("%q is not a duration: unknown unit %q (%s)", clip(s), clip(unit), hint)
			}
		}
	}
	return 0, fmt.Errorf("%q is not a duration (%s)", clip(s), how)
}

// formatDuration writes v as time.Duration.String does, without the zero
// minutes and seconds it adds: 1m, 1h, 1h30m, 1m30s, 500ms.
func formatDuration(v time.Duration) string {
	s := v.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// oneOf returns f's value, which must be one of choices.
func (d *decoder) oneOf(f field, path, what string, choices []string) (string, bool) {
	v, ok := d.str(f, path, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, v) {
		msg := fmt.Sprintf("%q is not %s", clip(v), what)
		if s := suggest(v, choices); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.errorf(d.resolve(f.val), path, "%s; use %s", msg, list(choices, "or"))
		return "", false
	}
	return v, true
}

// quotedHint explains a quoted value that would have had the wanted type
// without its quotes.
func quotedHint(n *yaml.Node, want string) string {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		return ""
	}
	if tag, ok := resolvesTo(n.Value); ok && tag == want {
		return " (remove the quotes)"
	}
	return ""
}

// resolvesTo reports the tag YAML would give s written plain.
func resolvesTo(s string) (string, bool) {
	var n yaml.Node
	if yaml.Unmarshal([]byte(s), &n) != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Content[0].ShortTag(), true
}

// describe names what a node is, for "expected X, found Y" messages. Scalars
// are quoted (and clipped) so the reader sees the offending value; callers
// must not describe secrets.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		case "!!int":
			return "the integer " + clip(n.Value)
		case "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return "the boolean " + clip(n.Value)
		case "!!null":
			return "an empty value"
		case "!!timestamp":
			return "the date " + clip(n.Value)
		}
		return fmt.Sprintf("a %s value", n.Tag)
	}
	return "a YAML document"
}

// clip shortens s for a message.
func clip(s string) string {
	const max = 48
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// suggest returns the choice s most likely stands for, or "".
func suggest(s string, choices []string) string {
	norm := func(x string) string {
		return strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || r == ' ' {
				return -1
			}
			return unicode.ToLower(r)
		}, x)
	}
	for _, c := range choices {
		if norm(c) == norm(s) {
			return c
		}
	}
	ns := norm(s)
	best, bestDist := "", 3
	for _, c := range choices {
		nc := norm(c)
		limit := 1 // a typo: one edit for short names, two for longer ones
		if len(nc) > 5 {
			limit = 2
		}
		if dist := editDistance(ns, nc); dist <= limit && dist < bestDist {
			best, bestDist = c, dist
		}
	}
	if best != "" {
		return best
	}
	for _, c := range choices { // a longer or shorter form: warning for warn
		if nc := norm(c); len(ns) >= 3 && len(nc) >= 3 && (strings.HasPrefix(ns, nc) || strings.HasPrefix(nc, ns)) {
			return c
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b (b is a short field name).
func editDistance(a, b string) int {
	if len(a) > 64 {
		return len(a)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// list words choices as "a, b and c" (or "a, b or c").
func list(choices []string, conj string) string {
	if len(choices) == 1 {
		return choices[0]
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " " + conj + " " + choices[len(choices)-1]
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
