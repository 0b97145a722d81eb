//go:build cgo

package rbd

// #include <stdint.h>
// #include <sys/types.h>
import "C"

import "runtime/cgo"

// ddpRBDComplete is called by librbd.go's C completion callback, on a
// librbd thread, once per request: it hands the result to the goroutine
// waiting in conn.do. done has room for it, so librbd's thread never waits.
//
//export ddpRBDComplete
func ddpRBDComplete(req C.uintptr_t, ret C.ssize_t) {
	cgo.Handle(req).Value().(*request).done <- int64(ret)
}
