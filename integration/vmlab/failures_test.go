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
	var long strings.Builder
	long.WriteString("=== RUN   TestC\n")
	for i := 0; i < 100; i++ {
		long.WriteString("    c_test.go:1: line\n")
	}
	long.WriteString("    c_test.go:2: the reason\n--- FAIL: TestC (1.00s)\n")
	got = Failures([]byte(long.String()))
	if !strings.Contains(got, "the reason") || strings.Count(got, "\n") > maxFailureLines+maxEntryHeads+4 {
		t.Errorf("Failures of a long log keeps %d lines, reason kept %v", strings.Count(got, "\n"), strings.Contains(got, "the reason"))
	}
	// The error came first, then a long log (a dmesg): its line is kept.
	long.Reset()
	long.WriteString("=== RUN   TestD\n    d_test.go:5: X fails: ours\n    d_test.go:9: dmesg:\n")
	for i := 0; i < 100; i++ {
		long.WriteString("        [   1.0] kernel line\n")
	}
	long.WriteString("--- FAIL: TestD (1.00s)\n")
	got = Failures([]byte(long.String()))
	if !strings.Contains(got, "d_test.go:5: X fails: ours") || strings.Count(got, "\n") > maxFailureLines+maxEntryHeads+4 {
		t.Errorf("Failures of an early error before a long log:\n%s", got)
	}
}
