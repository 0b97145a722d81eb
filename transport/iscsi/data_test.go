package iscsi

import (
	"bytes"
	"testing"
)

// The octets of each PDU as RFC 7143's figures lay them out (sections
// 11.7.1, 11.7.2 and 11.8), written by hand, against the setters.
func TestDataPDULayout(t *testing.T) {
	t.Run("Data-Out", func(t *testing.T) {
		want := []byte{
			0x05, 0x80, 0, 0, 0, 0x00, 0x20, 0x00, // opcode, F, AHS 0, DSL 8192
			0, 1, 0, 0, 0, 0, 0, 0, // LUN 1
			0x11, 0x22, 0x33, 0x44, // ITT
			0xaa, 0xbb, 0xcc, 0xdd, // TTT
			0, 0, 0, 0, // reserved
			0, 0, 0, 9, // ExpStatSN
			0, 0, 0, 0, // reserved
			0, 0, 0, 3, // DataSN
			0, 0, 0x60, 0, // Buffer Offset 24576
			0, 0, 0, 0, // reserved
		}
		p, _ := NewSCSIDataOut(make([]byte, BHSLen))
		p.SetFinal(true)
		p.SetDataSegmentLength(8192)
		l, _ := MakeLUN(1)
		p.SetLUN(l)
		p.SetITT(0x11223344)
		p.SetTTT(0xaabbccdd)
		p.SetExpStatSN(9)
		p.SetDataSN(3)
		p.SetBufferOffset(24576)
		if !bytes.Equal(p.BHS, want) {
			t.Fatalf("got  % x\nwant % x", []byte(p.BHS), want)
		}
		q, err := AsSCSIDataOut(BHS(want))
		if err != nil || q.TTT() != 0xaabbccdd || q.DataSN() != 3 || q.BufferOffset() != 24576 || q.ExpStatSN() != 9 || !q.Final() {
			t.Fatalf("decoded %+v, %v", q, err)
		}
	})
	t.Run("Data-In with status", func(t *testing.T) {
		want := []byte{
			0x25, 0x83, 0, 0x00, 0, 0, 0x02, 0x00, // F U S, status GOOD, DSL 512
			0, 0, 0, 0, 0, 0, 0, 0, // LUN
			0, 0, 0, 7, // ITT
			0xff, 0xff, 0xff, 0xff, // TTT
			0, 0, 0, 5, // StatSN
			0, 0, 0, 6, // ExpCmdSN
			0, 0, 0, 0x25, // MaxCmdSN
			0, 0, 0, 1, // DataSN
			0, 0, 0x02, 0, // Buffer Offset 512
			0, 0, 0x0c, 0, // Residual Count 3072
		}
		p, _ := NewSCSIDataIn(make([]byte, BHSLen))
		p.SetFinal(true)
		p.SetUnderflow(true)
		p.SetHasStatus(true)
		p.SetDataSegmentLength(512)
		p.SetITT(7)
		p.SetTTT(ReservedITT)
		p.SetStatSN(5)
		p.SetExpCmdSN(6)
		p.SetMaxCmdSN(0x25)
		p.SetDataSN(1)
		p.SetBufferOffset(512)
		p.SetResidualCount(3072)
		if !bytes.Equal(p.BHS, want) {
			t.Fatalf("got  % x\nwant % x", []byte(p.BHS), want)
		}
		q, err := AsSCSIDataIn(BHS(want))
		if err != nil || !q.HasStatus() || !q.Underflow() || q.Overflow() || q.Acknowledge() || q.ResidualCount() != 3072 || q.DataSN() != 1 {
			t.Fatalf("decoded %+v, %v", q, err)
		}
	})
	t.Run("R2T", func(t *testing.T) {
		want := []byte{
			0x31, 0x80, 0, 0, 0, 0, 0, 0, // F always 1, no data segment
			0, 2, 0, 0, 0, 0, 0, 0, // LUN 2
			0, 0, 0x10, 0, // ITT
			0, 0, 0, 0x2a, // TTT
			0, 0, 0, 8, // StatSN
			0, 0, 0, 9, // ExpCmdSN
			0, 0, 0, 0x40, // MaxCmdSN
			0, 0, 0, 2, // R2TSN
			0, 0x10, 0, 0, // Buffer Offset 1 MiB
			0, 0x04, 0, 0, // Desired Data Transfer Length 256 KiB
		}
		p, _ := NewR2T(make([]byte, BHSLen))
		l, _ := MakeLUN(2)
		p.SetLUN(l)
		p.SetITT(0x1000)
		p.SetTTT(0x2a)
		p.SetStatSN(8)
		p.SetExpCmdSN(9)
		p.SetMaxCmdSN(0x40)
		p.SetR2TSN(2)
		p.SetBufferOffset(1 << 20)
		p.SetDesiredDataTransferLength(256 << 10)
		if !bytes.Equal(p.BHS, want) {
			t.Fatalf("got  % x\nwant % x", []byte(p.BHS), want)
		}
		q, err := AsR2T(BHS(want))
		if err != nil || q.R2TSN() != 2 || q.DesiredDataTransferLength() != 256<<10 || q.BufferOffset() != 1<<20 || q.TTT() != 0x2a {
			t.Fatalf("decoded %+v, %v", q, err)
		}
	})
	t.Run("wrong opcode", func(t *testing.T) {
		b := make([]byte, BHSLen)
		if _, err := AsR2T(b); err != ErrWrongOpcode {
			t.Fatalf("AsR2T of a NOP-Out: %v", err)
		}
	})
}
