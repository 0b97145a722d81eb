package iscsi

import "testing"

var (
	sinkErr  error
	sinkBHS  BHS
	sinkU32  uint32
	sinkU64  uint64
	sinkBool bool
	sinkN    int
)

// TestZeroAllocs checks that parsing, the accessors, the setters and the
// text iterator and appender (with capacity) allocate nothing, on error
// paths as well.
func TestZeroAllocs(t *testing.T) {
	seg := []byte("InitiatorName=iqn.x\x00SessionType=Normal\x00\x00\x00\x00")
	bad := []byte("InitiatorName=iqn.x\x00Bogus\x00")
	buf := make([]byte, BHSLen)
	dst := make([]byte, 0, 256)
	tests := []struct {
		name string
		f    func()
	}{
		{"Parse", func() { sinkBHS, sinkErr = Parse(goldenLogin) }},
		{"Parse short", func() { sinkBHS, sinkErr = Parse(goldenLogin[:10]) }},
		{"accessors", func() {
			b, _ := Parse(goldenLogin)
			l, err := AsLoginReq(b)
			sinkErr = err
			sinkU64 = l.ISID() + uint64(l.CmdSN()) + uint64(l.DataSegmentLength()) + uint64(l.LUN())
			sinkBool = l.Transit()
			sinkN = l.PDULen()
		}},
		{"AsSCSICommand error", func() { _, sinkErr = AsSCSICommand(BHS(goldenLogin)) }},
		{"NewSCSICommand", func() {
			c, _ := NewSCSICommand(buf)
			c.SetRead(true)
			c.SetExpectedDataTransferLength(4096)
			sinkErr = c.SetCDB(goldenLogin[:10])
			sinkErr = c.SetDataSegmentLength(0)
		}},
		{"LUN", func() {
			l, _ := MakeLUN(300)
			n, err := l.Number()
			sinkU32, sinkErr = uint32(n), err
		}},
		{"ParseText", func() {
			it := ParseText(seg)
			for it.Next() {
				sinkN += len(it.Key()) + len(it.Value())
			}
			sinkErr = it.Err()
		}},
		{"ParseText error", func() {
			it := ParseText(bad)
			for it.Next() {
			}
			sinkErr = it.Err()
		}},
		{"AppendText", func() {
			d, err := AppendText(dst[:0], "MaxBurstLength", "262144")
			sinkN, sinkErr = len(PadText(d)), err
		}},
	}
	for _, tt := range tests {
		if a := testing.AllocsPerRun(100, tt.f); a != 0 {
			t.Errorf("%s: %v allocs", tt.name, a)
		}
	}
}
