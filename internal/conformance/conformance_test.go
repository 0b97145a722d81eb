package conformance

import (
	"reflect"
	"testing"
)

// A shortened console output of iscsi-test-cu: a pass, a failure with its
// assertion lines, a pass by skipping, and a test cut off by a crash.
const sample = `
Suite: SCSI.Inquiry
  Test: Standard ...passed
  Test: EVPD ...FAILED
    1. test_inquiry_evpd.c:55  - Invalid PageLength returned
Suite: iSCSIdatasn
  Test: iSCSIDataSnInvalid ...
[SKIPPED] not iSCSI/TCP
passed
  Test: Crashed ...
`

func TestParse(t *testing.T) {
	got := Parse(sample)
	want := map[string]bool{
		"SCSI.Inquiry.Standard":          true,
		"SCSI.Inquiry.EVPD":              false,
		"iSCSIdatasn.iSCSIDataSnInvalid": true,
		"iSCSIdatasn.Crashed":            false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse: %v, want %v", got, want)
	}
}

func TestJudge(t *testing.T) {
	res := map[string]bool{"a.pass": true, "a.fail": false, "a.listedFail": false, "a.listedPass": true}
	failed, stale := Judge(res, map[string]string{"a.listedFail": "why"}, map[string]string{"a.listedPass": "why"})
	if !reflect.DeepEqual(failed, []string{"a.fail"}) || !reflect.DeepEqual(stale, []string{"a.listedPass"}) {
		t.Fatalf("Judge: failed %v, stale %v", failed, stale)
	}
}
