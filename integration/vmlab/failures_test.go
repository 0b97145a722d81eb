package vmlab

import (
	"strings"
	"testing"
)

func TestFailures(t *testing.T) {
	out := `=== RUN   TestA
    a_test.go:10: fine
=== RUN   TestB
=== RUN   TestB/sub
    b_test.go:20: getsockopt SCTP_STATUS: invalid argument
=== NAME  TestA
    a_test.go:11: still fine
--- PASS: TestA (0.01s)
--- FAIL: TestB (0.02s)
    --- FAIL: TestB/sub (0.02s)
FAIL
`
	got := Failures([]byte(out))
	for _, want := range []string{"b_test.go:20: getsockopt SCTP_STATUS: invalid argument", "--- FAIL: TestB/sub"} {
		if !strings.Contains(got, want) {
			t.Errorf("Failures lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "fine") {
		t.Errorf("Failures keeps a passing test's lines:\n%s", got)
	}
	if got := Failures([]byte("=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n")); got != "" {
		t.Errorf("Failures of a passing run = %q, want empty", got)
	}
	// Long logs: the reason is kept, and the report stays bounded.
	for _, c := range []struct{ name, head, line, tail, want string }{
		{"the reason last", "=== RUN   TestC\n", "    c_test.go:1: line\n",
			"    c_test.go:2: the reason\n--- FAIL: TestC (1.00s)\n", "c_test.go:2: the reason"},
		// The error came first, then a long log entry (a dmesg).
		{"the reason before a dmesg", "=== RUN   TestD\n    d_test.go:5: X fails: ours\n    d_test.go:9: dmesg:\n",
			"        [   1.0] kernel line\n", "--- FAIL: TestD (1.00s)\n", "d_test.go:5: X fails: ours"},
	} {
		got := Failures([]byte(c.head + strings.Repeat(c.line, 100) + c.tail))
		if !strings.Contains(got, c.want) || strings.Count(got, "\n") > maxFailureLines+maxEntryHeads+4 {
			t.Errorf("%s: Failures keeps %d lines, without %q or too many:\n%s", c.name, strings.Count(got, "\n"), c.want, got)
		}
	}
}
