// Package conformance holds what the runs of libiscsi's conformance suite
// (iscsi-test-cu) against ddptarget share: the tests that do not apply to
// ddptarget, with the clause that says why, and the reading of the suite's
// CUnit output. The host run over iSCSI/TCP (transport,
// TestLibiscsiConformance) and the guest run over iSER
// (integration/peers) judge their results against the same list, so the
// two cannot drift apart (docs/interop.md, "libiscsi's conformance
// suite").
package conformance

import (
	"regexp"
	"sort"
	"strings"
)

// NotApplicable lists the tests of iscsi-test-cu that do not apply to
// ddptarget, each with the clause that makes it so. A run fails when one
// of them passes, so the list cannot outlive its reason.
var NotApplicable = map[string]string{
	// The test corrupts DataSN and expects the WRITE to fail, then the
	// next one to succeed on the same session. At ErrorRecoveryLevel 0 (the
	// only level we negotiate, RFC 7143 section 13.20) a DataSN error can
	// only be recovered by session recovery (section 7.1.4.2 and 7.14): the
	// target drops the connection, and libiscsi, told not to reconnect,
	// fails the later commands of the test as well. Over iSER
	// (integration/peers) there are no Data-Out PDUs whose DataSN could
	// be corrupted: solicited data moves by RDMA Read (RFC 7145 section
	// 7.3.4), and the test fails there too.
	"iSCSIdatasn.iSCSIDataSnInvalid": "ErrorRecoveryLevel 0: a DataSN error ends the connection (RFC 7143 sections 7.1, 13.20)",
}

var cuTest = regexp.MustCompile(`(?m)^Suite: (\S+)|^  Test: (\S+) \.\.\.`)

// Parse reads CUnit's console output: each test's name, SUITE.TEST, and
// whether it passed.
func Parse(out string) map[string]bool {
	res := map[string]bool{}
	suite := ""
	idx := cuTest.FindAllStringSubmatchIndex(out, -1)
	for i, m := range idx {
		if m[2] >= 0 {
			suite = out[m[2]:m[3]]
			continue
		}
		name := suite + "." + out[m[4]:m[5]]
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		body := out[m[1]:end]
		res[name] = !strings.Contains(body, "FAILED") && strings.Contains(body, "passed")
	}
	return res
}

// Judge compares a run's results with lists of expected failures: failed
// are the tests that failed and are in no list, stale the listed tests
// that ran and passed. Both are sorted.
func Judge(results map[string]bool, lists ...map[string]string) (failed, stale []string) {
	for name, ok := range results {
		listed := false
		for _, l := range lists {
			if _, in := l[name]; in {
				listed = true
			}
		}
		switch {
		case !ok && !listed:
			failed = append(failed, name)
		case ok && listed:
			stale = append(stale, name)
		}
	}
	sort.Strings(failed)
	sort.Strings(stale)
	return failed, stale
}
