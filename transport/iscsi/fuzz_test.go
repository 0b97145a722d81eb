package iscsi

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics, accepts exactly the 48-octet
// prefixes with a defined opcode, and that the generic and typed accessors
// read what the setters of a copy write. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, pdu []byte) {
		b, err := Parse(pdu)
		if err != nil {
			if b != nil {
				t.Fatal("BHS alongside an error")
			}
			if len(pdu) >= BHSLen && Opcode(pdu[0]&0x3f).Valid() {
				t.Fatalf("rejected valid BHS: %v", err)
			}
			return
		}
		if len(b) != BHSLen || b.PDULen() < BHSLen {
			t.Fatal("bad length")
		}
		// Rebuild the common fields into a fresh BHS.
		c, err := Init(make([]byte, BHSLen), b.Opcode())
		if err != nil {
			t.Fatal(err)
		}
		c[1], c[2], c[3] = b[1], b[2], b[3]
		c.SetImmediate(b.Immediate())
		c.SetTotalAHSLength(b.TotalAHSLength())
		if err := c.SetDataSegmentLength(b.DataSegmentLength()); err != nil {
			t.Fatal(err)
		}
		c.SetLUN(b.LUN())
		c.SetITT(b.ITT())
		for off := 20; off < BHSLen; off += 4 {
			c.SetWord(off, b.Word(off))
		}
		want := bytes.Clone(b)
		want[0] &^= 0x80
		if !bytes.Equal(c, want) {
			t.Fatalf("rebuilt\n% x\nwant\n% x", []byte(c), want)
		}
		switch b.Opcode() {
		case OpLoginReq, OpLoginResp:
			l := LoginReq{InitiatorSNs{b}}
			if l.CSG() > 3 || l.NSG() > 3 || l.ISID()>>48 != 0 {
				t.Fatal("login field out of range")
			}
		case OpSCSICommand:
			s, err := AsSCSICommand(b)
			if err != nil || len(s.CDB()) != 16 || s.Attr() > 7 {
				t.Fatal("SCSI command view")
			}
		}
	})
}

// FuzzParseText checks that the text iterator never panics, yields only
// keys and values within the limits of section 6.1, and that appending
// what it yields reproduces the segment up to where it stopped. Seeds:
// testdata/fuzz/FuzzParseText.
func FuzzParseText(f *testing.F) {
	f.Fuzz(func(t *testing.T, seg []byte) {
		it := ParseText(seg)
		var out []byte
		for it.Next() {
			k, v := it.Key(), it.Value()
			if len(k) == 0 || len(k) > MaxKeyLen || valueTooLong(v, MaxValueLen) || bytes.IndexByte(v, 0) >= 0 {
				t.Fatalf("bad pair %q=%q", k, v)
			}
			var err error
			if out, err = AppendText(out, string(k), string(v)); err != nil {
				t.Fatalf("AppendText(%q, %q): %v", k, v, err)
			}
		}
		if !bytes.HasPrefix(seg, out) {
			t.Fatalf("re-encoded %q is not a prefix of %q", out, seg)
		}
		if it.Err() == nil && !allZero(seg[len(out):]) {
			t.Fatalf("clean end with %q left", seg[len(out):])
		}
	})
}
