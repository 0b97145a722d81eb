package rbd

import (
	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// An Image is a target's backing store that is not in the target's memory.
var _ blockdev.Store = (*Image)(nil)

// Mapping implements blockdev.Store: an image's octets are in the cluster,
// not in this process, so there is none; the LU reads with ReadAt into the
// transport's registered staging and RDMA-Writes from there.
func (im *Image) Mapping() *mem.Mapping { return nil }
