package lu

import (
	"fmt"
	"sort"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
	uuid "github.com/satori/go.uuid"
)

// Target is a SCSI target device: its name (the iSCSI TargetName) and LUN
// map. It must be complete before commands run: it is never changed after
// NewTarget, so execution needs no locks.
type Target struct {
	t    api.SCSITarget
	luns map[uint16]*LU
	lun0 *api.SCSILu // answers INQUIRY and REPORT LUNS when LUN 0 is absent
	ops0 []gscsi.SCSIDeviceOperation
	alua *alua // nil: no ALUA (alua.go)
}

// NewTarget returns a target named name exporting luns by LUN number.
func NewTarget(name string, luns map[uint16]*LU) (*Target, error) {
	t := &Target{luns: make(map[uint16]*LU, len(luns))}
	t.lun0, t.ops0 = newLUN0()
	t.t = api.SCSITarget{
		Name:    name,
		State:   api.TargetReady,
		Devices: make(api.LUNMap, len(luns)),
		LUN0:    t.lun0,
		ITNexus: map[uuid.UUID]*api.ITNexus{},
		TargetPortGroups: []*api.TargetPortGroup{{GroupID: 1, TargetPortGroup: []*api.SCSITargetPort{
			{RelativeTargetPortID: 1, TargetPortName: name}}}},
	}
	t.t.SCSITargetDriver = t // leads command functions to t (commandTarget)
	for n, l := range luns {
		if n > iscsi.MaxLUN {
			return nil, fmt.Errorf("lu: LUN %d above %d", n, iscsi.MaxLUN)
		}
		if l == nil {
			return nil, fmt.Errorf("lu: LUN %d has no LU", n)
		}
		t.luns[n] = l
		t.t.Devices[uint64(n)] = l.sl
	}
	return t, nil
}

// Name returns the target's name.
func (t *Target) Name() string { return t.t.Name }

// LU returns the LU at LUN n, or nil.
func (t *Target) LU(n uint16) *LU { return t.luns[n] }

// LUNs returns the LUN numbers in ascending order.
func (t *Target) LUNs() []uint16 {
	ns := make([]uint16, 0, len(t.luns))
	for n := range t.luns {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	return ns
}

// newLUN0 is the stand-in LU that answers INQUIRY (peripheral qualifier "not
// connected"), REPORT LUNS and REQUEST SENSE for a target without LUN 0, as
// gotgt's NewLUN0 would if it did not need a registered "null" backing store.
func newLUN0() (*api.SCSILu, []gscsi.SCSIDeviceOperation) {
	proto := gscsi.NewSBCDevice(api.TYPE_UNKNOWN)
	l := &api.SCSILu{DeviceProtocol: proto, BlockShift: 9}
	_ = proto.InitLu(l) // only sets attributes and mode pages
	l.Attrs.Online = false
	l.Attrs.Lbppbe = 0
	var ops []gscsi.SCSIDeviceOperation
	if sbc, ok := proto.(gscsi.SBCSCSIDeviceProtocol); ok {
		ops = sbc.SCSIDeviceOps
		replace(ops, inquiry, scsi.Inquiry)
	}
	return l, ops
}
