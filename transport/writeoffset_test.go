package transport_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/login"
)

// TestWriteBaseOffsetWithImmediateData sends a SCSI WRITE whose first 8 KiB
// come as immediate data and whose last 4 KiB the target must fetch by
// RDMA Read, with the Write Base Offset as each kind of initiator sets it:
//
//   - declaring nothing, offset past the immediate data: Linux's ib_iser
//     and libiscsi (found by integration/iser, where Linux's 12 KiB writes
//     failed with an I/O error: our target read beyond their buffer);
//   - declaring TaggedBufferForSolicitedDataOnly=Yes, offset past the
//     immediate data (RFC 7145 section 6.9; our initiator);
//   - declaring it No, offset at the start of the data (RFC 7145's
//     default).
//
// Every octet must land in the store.
func TestWriteBaseOffsetWithImmediateData(t *testing.T) {
	const imm, total = 8192, 12288
	cases := []struct {
		name     string
		declare  *bool
		skipsImm bool
	}{
		{"undeclared, like Linux and libiscsi", nil, true},
		{"TaggedBufferForSolicitedDataOnly=Yes", ptr(true), true},
		{"TaggedBufferForSolicitedDataOnly=No", ptr(false), false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := blockdev.NewMemory(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			r := newRig(t, rigOpts{stores: []blockdev.Store{st}})
			p := newRawPeer(t, r.dev)
			p.dial(r.addr, false)
			var res login.Result
			switch {
			case tc.declare == nil:
				res = p.login()
			case *tc.declare:
				res = p.loginWith(func(o *login.Params) { o.TaggedBufferForSolicitedDataOnly = true })
			default:
				// An Offer declares the key only when Yes.
				res = p.loginWith(nil, "TaggedBufferForSolicitedDataOnly=No")
			}
			buf := p.c.ExtraMR().Bytes()[:total]
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
			wbo := p.c.ExtraMR().BaseTO()
			if tc.skipsImm {
				wbo += imm
			}
			const lba = 16
			cmd := pdu(iscsi.OpSCSICommand, func(b iscsi.BHS) {
				c, _ := iscsi.AsSCSICommand(b)
				c.SetITT(1)
				c.SetCmdSN(res.CmdSN)
				c.SetCDB(write16(lba, total/blockdev.BlockSize))
				c.SetExpectedDataTransferLength(total)
				c.SetWrite(true)
				c.SetAttr(1)
			}, buf[:imm])
			p.sendRaw(iser.HeaderFields{WriteValid: true, WriteSTag: uint32(p.c.ExtraMR().STag()), WriteBaseOffset: wbo}, cmd)
			resp, _ := iscsi.AsSCSIResponse(p.expect(iscsi.OpSCSIResponse))
			if resp.Status() != 0 {
				t.Fatalf("WRITE status %#x", resp.Status())
			}
			got := st.Mapping().Bytes()[lba*blockdev.BlockSize:][:total]
			if !bytes.Equal(got, buf) {
				for j := range got {
					if got[j] != buf[j] {
						t.Fatalf("the store differs from the data from octet %d of %d", j, total)
					}
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
