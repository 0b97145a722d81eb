package remote

import (
	"context"
	"fmt"
	"io"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// Report describes a session logged in at portal on w, as "ddpinitiator
// login" prints it: the target, ISID and TSIH, the negotiated parameters
// that bound I/O and the command window, then each LUN the target reports
// with its size. Its errors name the SCSI command that failed.
func Report(ctx context.Context, s *initiator.Session, portal string, w io.Writer) error {
	r, p := s.Result(), s.Params()
	fmt.Fprintf(w, "target %s at %s: logged in (ISID %012x, TSIH %d)\n", r.TargetName, portal, r.ISID, r.TSIH)
	fmt.Fprintf(w, "  ImmediateData=%v FirstBurstLength=%d MaxBurstLength=%d TargetRecvDataSegmentLength=%d MaxCmdSN-CmdSN=%d\n",
		p.ImmediateData, p.FirstBurstLength, p.MaxBurstLength, p.TargetRecvDataSegmentLength, r.MaxCmdSN-r.CmdSN+1)
	luns, err := DiskLUNs(ctx, s)
	if err != nil {
		return err
	}
	for _, n := range luns {
		blocks, bs, err := ReadCapacity(ctx, s, n)
		if err != nil {
			return fmt.Errorf("READ CAPACITY of LUN %d: %v", n, err)
		}
		fmt.Fprintf(w, "  LUN %d: %d blocks of %d octets (%s)\n", n, blocks, bs, hostdev.HumanSize(int64(blocks)*int64(bs)))
	}
	return nil
}
