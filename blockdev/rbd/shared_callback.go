//go:build cgo

package rbd

// #include <stddef.h>
// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// ddpSharedNotify is called by shared_librados.go's C watch callback, on a
// librados thread, for every notify on a watched object. It copies the
// payload and returns without waiting for changed: a notify of this
// Shared's own is acknowledged at once, any other is queued for the watch
// goroutine, which acknowledges it after changed returns.
//
//export ddpSharedNotify
func ddpSharedNotify(h C.uintptr_t, notifyID, cookie C.uint64_t, data unsafe.Pointer, n C.size_t) {
	var payload []byte
	if data != nil && n > 0 {
		payload = C.GoBytes(data, C.int(n))
	}
	cgo.Handle(h).Value().(*Shared).notified(uint64(notifyID), uint64(cookie), payload)
}

// ddpSharedWatchError is called by the C watch error callback, on a
// librados thread, when a watch has failed; err is a negative errno.
//
//export ddpSharedWatchError
func ddpSharedWatchError(h C.uintptr_t, cookie C.uint64_t, err C.int) {
	cgo.Handle(h).Value().(*Shared).watchFailed(uint64(cookie), int(-err))
}
