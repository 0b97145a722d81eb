package vmlab

import (
	"regexp"
	"strings"
)

// maxFailureLines bounds what Failures keeps of one failed test: its last
// lines, where the reason usually is.
const maxFailureLines = 30

// maxEntryHeads bounds the first lines of a long failed test's log
// entries that Failures keeps besides: a t.Errorf made before a long
// t.Log (a dmesg in a cleanup) is among them.
const maxEntryHeads = 40

// maxHeadLen cuts each such first line.
const maxHeadLen = 240

var (
	headingRe = regexp.MustCompile(`^\s*=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	failRe    = regexp.MustCompile(`^\s*--- FAIL: (\S+) `)
	entryRe   = regexp.MustCompile(`^\s+\S+\.go:\d+: `) // a t.Log or t.Error's first line
)

// Failures picks out of a guest's `go test -v` output what each failed
// test printed (the lines under its === RUN/NAME/CONT headings: the last
// maxFailureLines of them, after the first line of each of its log
// entries before those, at most maxEntryHeads) and its --- FAIL line, in
// the order the tests failed. Host tests report it before the guest's whole output, so that
// the reason stays in view when a long log is cut. It is empty when no
// test failed.
func Failures(out []byte) string {
	lines := map[string][]string{}
	var cur string
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if m := headingRe.FindStringSubmatch(l); m != nil {
			cur = m[1]
			continue
		}
		if m := failRe.FindStringSubmatch(l); m != nil {
			kept := lines[m[1]]
			if len(kept) > maxFailureLines {
				var heads []string
				for _, k := range kept[:len(kept)-maxFailureLines] {
					if entryRe.MatchString(k) {
						if len(k) > maxHeadLen {
							k = k[:maxHeadLen] + "…"
						}
						heads = append(heads, k)
					}
				}
				if len(heads) > maxEntryHeads {
					heads = heads[len(heads)-maxEntryHeads:]
				}
				if len(heads) > 0 {
					b.WriteString("\t[the first line of each earlier entry:]\n")
					for _, h := range heads {
						b.WriteString(h + "\n")
					}
				}
				b.WriteString("\t[…]\n")
				kept = kept[len(kept)-maxFailureLines:]
			}
			for _, k := range kept {
				b.WriteString(k + "\n")
			}
			b.WriteString(strings.TrimSpace(l) + "\n")
			continue
		}
		if cur != "" && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "--- ") {
			lines[cur] = append(lines[cur], l)
		}
	}
	return b.String()
}
