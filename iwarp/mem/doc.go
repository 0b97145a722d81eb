// Package mem is the memory side of the software RNIC: mmap'd memory that
// payload is placed into and sent from, Protection Domains (PD), registration
// of Memory Regions (MR) under Steering Tags (STag), and the lock-free check
// that the engine runs for every tagged DDP Segment and RDMA Read Request.
//
// # Memory
//
// Region memory lives outside the Go heap (see [Anonymous] and [MapFile]) so
// that the engine can readv from a socket straight into it and writev from it,
// and so that the garbage collector never moves or scans it.
//
// # STags and Tagged Offsets
//
// An STag is a 24-bit index into a [Table] (high bits) and an 8-bit key (low
// bits) that is drawn at random at each registration, as RDMA verbs do. A
// region's Tagged Offsets (TO) start either at zero or at the virtual address
// of its first byte ([Addressing]).
//
// # Fast registration
//
// [Table.RegisterFast] creates an MR over the largest range it may ever
// describe, with no valid STag; [Table.FastRegister] then, per use and
// without allocating, makes a window of that range its region with some of
// its access rights and a fresh key (the verbs' Fast-Register). The STag
// index stays, the key changes, so the STag of an earlier use fails. Such a
// region's key, access, validity and window live in atomics guarded by one
// state word that a check reads before and after publishing its hazard.
//
// # Memory-safety contract
//
// The data path is lock-free. Goroutines that use region memory publish which
// regions they use (hazard pointers), and deregistration waits for exactly
// those users:
//
//   - Every goroutine that touches region memory (the receive goroutine that
//     places payload, the transmit goroutine that sends RDMA Read Response or
//     Send payload) owns a [Reader] and brackets its use with [Reader.Enter]
//     and [Reader.Exit]. [Reader.Check] holds the region it hands out memory
//     of until Exit; the slice may be used only until then and must not be
//     kept past it (check the STag again next time: it may have been
//     invalidated meanwhile). A section holds at most [MaxHeld] regions.
//   - [Table.Invalidate] and [Table.RemoteInvalidate] take effect at once for
//     new checks but do not wait for sections that hold the region already.
//   - [Table.Deregister] invalidates, waits until no Reader holds the region,
//     then frees the STag index. After it returns nil no goroutine holds a
//     slice into that MR's memory, so once all its MRs are deregistered a
//     [Mapping] may be closed (munmap); Close refuses while MRs are
//     registered.
//   - Deregistration waits only for the holders of that region, so a section
//     that is slow (a page fault on file-backed memory, a preempted
//     goroutine) delays nothing else. Still, a goroutine should not block
//     indefinitely inside a section (for example on a peer's next bytes on a
//     blocking socket): Exit first, and Check again after.
//   - Deregister must not be called from inside a critical section that holds
//     the region: it would wait for itself (until its context is done).
package mem
