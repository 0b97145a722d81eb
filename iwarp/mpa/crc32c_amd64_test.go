package mpa

import "testing"

// The portable paths (hash/crc32 and copy) run where the CPU lacks
// AVX-512 VPCLMULQDQ; run the tests that cover them here too.
func TestWithoutFolding(t *testing.T) {
	if !haveFold {
		t.Skip("this CPU has no AVX-512 VPCLMULQDQ: every test already takes the portable paths")
	}
	haveFold = false
	defer func() { haveFold = true }()
	for name, test := range map[string]func(*testing.T){
		"CRCSqueeze":                TestCRCSqueeze,
		"CRCSpread":                 TestCRCSpread,
		"DirectReadAtEveryPhase":    TestDirectReadAtEveryPhase,
		"StagingMatchesReferencing": TestStagingMatchesReferencing,
		"RoundTrip":                 TestRoundTrip,
	} {
		t.Run(name, test)
	}
}
