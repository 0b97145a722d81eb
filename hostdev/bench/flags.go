package bench

import (
	"encoding/json"
	"flag"
	"io"
	"time"

	"github.com/ddpstore/ddpstore/config"
)

// Register defines the flags of "ddpinitiator bench" that set o, with
// their defaults: LUN 0, randread of 4 KiB blocks at depth 32 for 10 s
// over the whole LUN, no verification, progress on a terminal.
func (o *Options) Register(fs *flag.FlagSet) {
	o.BlockSize = 4 * config.KiB
	fs.IntVar(&o.LUN, "lun", 0, "the LUN to drive")
	fs.StringVar(&o.RW, "rw", "randread", "read, write, randread, randwrite or randrw (half reads)")
	fs.Var(&o.BlockSize, "bs", "block size of each I/O (512 to 16MiB, a multiple of 512)")
	fs.IntVar(&o.IODepth, "iodepth", 32, "I/Os in flight (1 to 1024)")
	fs.DurationVar(&o.Runtime, "runtime", 10*time.Second, "how long to run")
	fs.Var(&o.Size, "size", "the part of the LUN to use, from LBA 0 (default: all of it)")
	fs.BoolVar(&o.Verify, "verify", false, "check that what is read is what was written")
	fs.StringVar(&o.Progress, "progress", "auto", "progress line once a second: auto (on a terminal), always, never")
	fs.BoolVar(&o.Stalls, "stalls", false, "also measure how late this process's goroutines run (a wake-up every millisecond): tells a long I/O spent here from one spent at the target")
}

// PrintJSON writes the summary as indented JSON.
func (r *Result) PrintJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
