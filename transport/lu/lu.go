package lu

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

var pageSize = os.Getpagesize()

// LU is one logical unit over a backing store.
type LU struct {
	id    uint64
	sl    *api.SCSILu
	ops   []gscsi.SCSIDeviceOperation // gotgt's table with our replacements; indexed by opcode
	store blockdev.Store
	data  []byte    // the store's mapping; nil for a store not in memory (Remote)
	lock  rangeLock // taken by the commands that change blocks
	// holder is the I_T nexus holding the LU's SPC-2 reservation, nil
	// when none does (reserve.go).
	holder atomic.Pointer[Nexus]
	// pr is the persistent reservation state (pr.go); prActive is set
	// while it has a registration, so that commands check it only then.
	pr       prState
	prActive atomic.Bool
	// paged: the mapping is of a file or device, whose pages can fail to
	// come in (a disk read error, a file truncated under the LU).
	paged bool
	// placeable: the store is in memory and writable, so a transport may
	// place WRITE data straight into its mapping (Placement).
	placeable bool
	// populated has a bit per 1 MiB chunk of the store whose pages are
	// populated for placement (populate); nil unless placeable.
	populated []atomic.Uint64
}

// New returns an LU over store. id names it in INQUIRY's device
// identification (VPD page 0x83) and must be unique among the LUs a host
// sees.
func New(id uint64, store blockdev.Store) (*LU, error) {
	if store.Size()%blockdev.BlockSize != 0 || store.Size() == 0 {
		return nil, fmt.Errorf("lu: store size %d is not a positive multiple of %d", store.Size(), blockdev.BlockSize)
	}
	_, inMemory := store.(*blockdev.Memory)
	l := &LU{id: id, store: store, paged: !inMemory}
	if m := store.Mapping(); m != nil {
		if int64(m.Len()) < store.Size() {
			return nil, fmt.Errorf("lu: store mapping shorter than its size %d", store.Size())
		}
		l.data = m.Bytes()[:store.Size()]
		im, ok := store.(blockdev.InMemory)
		l.placeable = ok && im.InMemory() && m.Writable() && !store.ReadOnly()
		if l.placeable {
			chunks := (store.Size() + 1<<populateShift - 1) >> populateShift
			l.populated = make([]atomic.Uint64, (chunks+63)/64)
		}
	}
	proto := gscsi.NewSBCDevice(api.TYPE_DISK)
	sbc, ok := proto.(gscsi.SBCSCSIDeviceProtocol)
	if !ok {
		return nil, fmt.Errorf("lu: gotgt SBC device has unexpected type %T", proto)
	}
	replace(sbc.SCSIDeviceOps, readWrite, scsi.Read6, scsi.Read10, scsi.Read12, scsi.Read16,
		scsi.Write6, scsi.Write10, scsi.Write12, scsi.Write16,
		scsi.WriteAndVerify10, scsi.WriteAndVerify12, scsi.WriteAndVerify16)
	replace(sbc.SCSIDeviceOps, writeSame, scsi.WriteSame10, scsi.WriteSame16)
	replace(sbc.SCSIDeviceOps, unmap, scsi.Unmap)
	replace(sbc.SCSIDeviceOps, syncCache, scsi.SynchronizeCache10, scsi.SynchronizeCache16)
	replace(sbc.SCSIDeviceOps, compareAndWrite, scsi.CompareAndWrite)
	replace(sbc.SCSIDeviceOps, serviceActionIn, scsi.ServiceActionIn16)
	replace(sbc.SCSIDeviceOps, inquiry, scsi.Inquiry)
	replace(sbc.SCSIDeviceOps, maintenanceIn, scsi.MaintenanceIn)
	replace(sbc.SCSIDeviceOps, reserve, scsi.Reserve6, scsi.Reserve10)
	replace(sbc.SCSIDeviceOps, release, scsi.Release6, scsi.Release10)
	// gotgt's persistent reservations are broken: ours (pr.go).
	replace(sbc.SCSIDeviceOps, persistentReserveIn, scsi.PersistentReserveIn)
	replace(sbc.SCSIDeviceOps, persistentReserveOut, scsi.PersistentReserveOut)
	// gotgt's ORWRITE(16) writes the data instead of ORing it: ILLEGAL
	// REQUEST, INVALID COMMAND OPERATION CODE.
	replace(sbc.SCSIDeviceOps, gscsi.SPCIllegalOp, scsi.OrWrite16)
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
	l.sl.Attrs.ThinProvisioning = l.Thin()
	l.sl.Attrs.Lbppbe = 0 // see readCapacity16
	// INQUIRY's T10 vendor and product identification (SPC-4 6.6.2), what
	// udev names and multipath.conf matches: ddpstore's, not gotgt's.
	l.sl.Attrs.VendorID, l.sl.Attrs.ProductID = VendorID, ProductID
	return l, nil
}

// VendorID and ProductID are what INQUIRY reports of every LU.
const (
	VendorID  = "DDPSTORE"
	ProductID = "DISK"
)

// replace sets the function of each opcode in ops to fn, keeping gotgt's
// reservation conflict bits.
func replace(ops []gscsi.SCSIDeviceOperation, fn api.CommandFunc, opcodes ...api.SCSICommandType) {
	for _, op := range opcodes {
		ops[op] = gscsi.NewSCSIDeviceOperation(fn, nil, ops[op].PRConflictBits)
	}
}

// Thin reports whether the LU is thin provisioned (SBC-3 4.7): its store
// deallocates what it discards. It is the one source of LBPME and LBPRZ in
// READ CAPACITY(16), of the Block Limits and Logical Block Provisioning VPD
// pages, and of whether UNMAP and WRITE SAME's UNMAP bit discard.
func (l *LU) Thin() bool { return !l.store.ReadOnly() && l.store.Thin() }

// Remote reports whether the LU's store is not in this process's memory
// (it has no Mapping): its READ data is read into the caller's buffer, and
// any of its commands may wait on the network, so the transport runs them
// off its connection's loop.
func (l *LU) Remote() bool { return l.data == nil }

// Store returns the LU's backing store.
func (l *LU) Store() blockdev.Store { return l.store }

// Size returns the LU's size in octets.
func (l *LU) Size() int64 { return l.store.Size() }

// backing adapts a blockdev.Store to gotgt's BackingStore for the commands
// gotgt still executes itself (VERIFY, PRE-FETCH). It also leads our
// command functions from gotgt's command record to the LU (luOf).
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
	if b.lu.data == nil {
		p := make([]byte, n)
		if err := b.lu.store.ReadAt(p, off); err != nil {
			return nil, err
		}
		return p, nil
	}
	return append([]byte(nil), b.lu.data[off:off+n]...), nil
}

// Write is not reached by the commands gotgt still executes; should a
// gotgt command write, it takes the range lock like ours.
func (b *backing) Write(p []byte, off int64) error {
	if b.lu.store.ReadOnly() {
		return fmt.Errorf("lu: write to a read-only store")
	}
	if err := b.check(off, int64(len(p))); err != nil {
		return err
	}
	lba := uint64(off) >> 9
	set := stripes(lba, (uint64(off)+uint64(len(p))+511)>>9-lba)
	b.lu.lock.lock(set)
	defer b.lu.lock.unlock(set)
	return b.lu.store.WriteAt(p, off)
}

func (b *backing) DataSync(off, n int64) error {
	if n == 0 {
		n = b.lu.store.Size() - off
	}
	return b.lu.store.Sync(off, n)
}

func (b *backing) Unmap(ds []api.UnmapBlockDescriptor) error {
	for _, d := range ds {
		b.lu.unpopulated(int64(d.Offset), int64(d.TL))
		if err := b.lu.store.Discard(int64(d.Offset), int64(d.TL)); err != nil {
			return err
		}
	}
	return nil
}

func (b *backing) check(off, n int64) error {
	if size := b.lu.store.Size(); off < 0 || n < 0 || off+n < off || off+n > size {
		return fmt.Errorf("lu: range [%d, %d) outside the LU's %d octets", off, off+n, size)
	}
	return nil
}
