package main

import (
	"fmt"
	"strings"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// describeStartup renders an MPA Request or Reply field by field.
func describeStartup(f mpa.StartupFrame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: Rev %d M=%d C=%d R=%d PD_Length %d",
		f.Kind(), f.Rev(), bit(f.M()), bit(f.C()), bit(f.R()), f.PDLength())
	if f.Rev() == mpa.Rev2 {
		v := f.IRDORD()
		fmt.Fprintf(&b, " IRD %d ORD %d", v.IRD, v.ORD)
		if v.PeerToPeer {
			fmt.Fprintf(&b, " peer-to-peer RTR %s", v.RTR)
		}
	}
	if pd := f.PrivateData(); len(pd) > 0 {
		fmt.Fprintf(&b, " Private Data %q", pd)
	}
	return b.String()
}

// describeULPDU renders a DDP Segment and the RDMAP Message it carries.
func describeULPDU(seg []byte) string {
	h, payload, err := ddp.Parse(seg)
	if err != nil {
		return fmt.Sprintf("DDP segment of %d octets: %v", len(seg), err)
	}
	var b strings.Builder
	ctl := rdmap.ControlOf(h)
	if h.Tagged() {
		fmt.Fprintf(&b, "DDP tagged L=%d STag %#08x TO %#x", bit(h.Last()), h.STag(), h.TO())
	} else {
		fmt.Fprintf(&b, "DDP untagged L=%d QN %d MSN %d MO %d", bit(h.Last()), h.QN(), h.MSN(), h.MO())
	}
	fmt.Fprintf(&b, " | RDMAP v%d %s", ctl.RV(), ctl.Opcode())
	if err := rdmap.ValidateHeader(h); err != nil {
		fmt.Fprintf(&b, " (invalid: %v)", err)
		return b.String()
	}
	switch ctl.Opcode() {
	case rdmap.OpReadRequest:
		if rr, err := rdmap.ParseReadRequest(payload); err == nil {
			fmt.Fprintf(&b, ": %d octets from STag %#08x TO %#x into STag %#08x TO %#x",
				rr.Size(), rr.SrcSTag(), rr.SrcTO(), rr.SinkSTag(), rr.SinkTO())
		} else {
			fmt.Fprintf(&b, ": %v", err)
		}
	case rdmap.OpTerminate:
		if t, err := rdmap.ParseTerminate(payload); err == nil {
			fmt.Fprintf(&b, ": %v", t.Err())
			if d := t.DDPHeader(); d != nil {
				fmt.Fprintf(&b, " (terminated segment: %d octets, header %x)", t.SegmentLength(), []byte(d))
			}
		} else {
			fmt.Fprintf(&b, ": %v", err)
		}
	default:
		if ctl.Opcode().Invalidates() {
			fmt.Fprintf(&b, " invalidate STag %#08x", rdmap.InvalidateSTag(h))
		}
		fmt.Fprintf(&b, ", %d octets%s", len(payload), preview(payload))
	}
	return b.String()
}

// preview shows the start of a payload when it is text.
func preview(p []byte) string {
	const max = 40
	if len(p) == 0 {
		return ""
	}
	s := p[:min(len(p), max)]
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return ""
		}
	}
	if len(p) > max {
		return fmt.Sprintf(" %q...", s)
	}
	return fmt.Sprintf(" %q", s)
}

func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}
