package lu

import (
	"fmt"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

// LU is one logical unit over a backing store.
type LU struct {
	sl    *api.SCSILu
	ops   []gscsi.SCSIDeviceOperation // gotgt's table with our replacements; indexed by opcode
	store blockdev.Store
	data  []byte // the store's mapping
}

// New returns an LU over store. id names it in INQUIRY's device
// identification (VPD page 0x83) and must be unique among the LUs a host
// sees.
func New(id uint64, store blockdev.Store) (*LU, error) {
	m := store.Mapping()
	if m == nil || int64(m.Len()) < store.Size() {
		return nil, fmt.Errorf("lu: store mapping shorter than its size %d", store.Size())
	}
	if store.Size()%blockdev.BlockSize != 0 || store.Size() == 0 {
		return nil, fmt.Errorf("lu: store size %d is not a positive multiple of %d", store.Size(), blockdev.BlockSize)
	}
	l := &LU{store: store, data: m.Bytes()[:store.Size()]}
	proto := gscsi.NewSBCDevice(api.TYPE_DISK)
	sbc, ok := proto.(gscsi.SBCSCSIDeviceProtocol)
	if !ok {
		return nil, fmt.Errorf("lu: gotgt SBC device has unexpected type %T", proto)
	}
	for _, op := range []api.SCSICommandType{api.READ_6, api.READ_10, api.READ_12, api.READ_16,
		api.WRITE_6, api.WRITE_10, api.WRITE_12, api.WRITE_16} {
		sbc.SCSIDeviceOps[op] = gscsi.NewSCSIDeviceOperation(readWrite, nil, sbc.SCSIDeviceOps[op].PRConflictBits)
	}
	l.ops = sbc.SCSIDeviceOps
	l.sl = &api.SCSILu{
		DeviceProtocol: sbc,
		Storage:        &backing{lu: l},
		BlockShift:     9,
		UUID:           id,
		Size:           uint64(store.Size()),
	}
	if err := sbc.InitLu(l.sl); err != nil {
		return nil, fmt.Errorf("lu: gotgt InitLu: %w", err)
	}
	l.sl.Attrs.Online = true
	l.sl.Attrs.Readonly = store.ReadOnly()
	l.sl.Attrs.Lbppbe = 3
	return l, nil
}

// Store returns the LU's backing store.
func (l *LU) Store() blockdev.Store { return l.store }

// Size returns the LU's size in octets.
func (l *LU) Size() int64 { return l.store.Size() }

// backing adapts a blockdev.Store to gotgt's BackingStore for the commands
// gotgt still executes itself (SYNCHRONIZE CACHE, VERIFY, ...).
type backing struct{ lu *LU }

func (b *backing) Open(*api.SCSILu, string) error        { return nil }
func (b *backing) Close(*api.SCSILu) error               { return nil }
func (b *backing) Init(*api.SCSILu, string) error        { return nil }
func (b *backing) Exit(*api.SCSILu) error                { return nil }
func (b *backing) Size(*api.SCSILu) uint64               { return uint64(b.lu.store.Size()) }
func (b *backing) DataAdvise(int64, int64, uint32) error { return nil }

func (b *backing) Read(off, n int64) ([]byte, error) {
	if err := b.check(off, n); err != nil {
		return nil, err
	}
	return append([]byte(nil), b.lu.data[off:off+n]...), nil
}

func (b *backing) Write(p []byte, off int64) error {
	if b.lu.store.ReadOnly() {
		return fmt.Errorf("lu: write to a read-only store")
	}
	if err := b.check(off, int64(len(p))); err != nil {
		return err
	}
	copy(b.lu.data[off:], p)
	return nil
}

func (b *backing) DataSync(off, n int64) error {
	if n == 0 {
		n = b.lu.store.Size() - off
	}
	return b.lu.store.Sync(off, n)
}

func (b *backing) Unmap(ds []api.UnmapBlockDescriptor) error {
	for _, d := range ds {
		if err := b.lu.store.Discard(int64(d.Offset), int64(d.TL)); err != nil {
			return err
		}
	}
	return nil
}

func (b *backing) check(off, n int64) error {
	if off < 0 || n < 0 || off+n < off || off+n > int64(len(b.lu.data)) {
		return fmt.Errorf("lu: range [%d, %d) outside the LU's %d octets", off, off+n, len(b.lu.data))
	}
	return nil
}
