package metrics_test

import (
	"testing"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
	"github.com/ddpstore/ddpstore/metrics"
)

// TestRNICTerminates: Terminates are exported by origin, layer and error,
// and promtool takes the text.
func TestRNICTerminates(t *testing.T) {
	tm := metrics.NewTarget()
	tm.RNIC.Set(func() iwarp.Counters {
		return iwarp.Counters{Terminates: []iwarp.TerminateCount{
			{Remote: false, Err: rdmap.Error{Layer: rdmap.LayerLLP, Type: 0, Code: 2}, Count: 3},
			{Remote: true, Err: rdmap.ErrInvalidSTag, Count: 1},
		}}
	})
	srv, err := metrics.Listen("127.0.0.1:0", tm.Registry)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body, fams := scrape(t, srv.Addr())
	var n int
	for _, m := range fams["ddptarget_rdma_terminates_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch {
		case labels["origin"] == "local" && labels["layer"] == "LLP" && m.GetCounter().GetValue() == 3,
			labels["origin"] == "remote" && labels["layer"] == "RDMAP" && m.GetCounter().GetValue() == 1:
			n++
		default:
			t.Errorf("unexpected series %v = %v", labels, m.GetCounter().GetValue())
		}
	}
	if n != 2 {
		t.Errorf("%d of the 2 Terminate series found:\n%s", n, body)
	}
	promtoolCheck(t, "ddptarget", body)
}
