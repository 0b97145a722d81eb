package config

import "testing"

// TestExamples: the example files shipped under examples/ stay valid.
func TestExamples(t *testing.T) {
	tc, err := LoadTarget("../examples/target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Targets) != 2 || len(tc.Portals) != 2 {
		t.Errorf("examples/target.yaml: %d targets, %d portals", len(tc.Targets), len(tc.Portals))
	}
	ic, err := LoadInitiator("../examples/initiator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ic.FindTarget("iqn.2026-11.io.example:data"); err != nil {
		t.Error(err)
	}
}
