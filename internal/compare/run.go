package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A pattern is one fio-style workload.
type pattern struct {
	name string
	rw   string // randread, randwrite, read, write
	bs   int
	qd   int
}

var patterns = []pattern{
	{"4k-randread-qd1", "randread", 4 << 10, 1},
	{"4k-randwrite-qd1", "randwrite", 4 << 10, 1},
	{"4k-randread-qd32", "randread", 4 << 10, 32},
	{"4k-randwrite-qd32", "randwrite", 4 << 10, 32},
	{"64k-randread-qd8", "randread", 64 << 10, 8},
	{"1m-read-qd8", "read", 1 << 20, 8},
	{"1m-write-qd8", "write", 1 << 20, 8},
}

// A system is one way of doing I/O to the image.
type system struct {
	name string
	// run does one measurement; the client runs on the client CPU.
	run func(ctx context.Context, p pattern) (sample, error)
	// server and daemon are the processes whose CPU time counts as the
	// server's and (with the client's own) the client's; cluster's count
	// as the server's too (the Ceph daemons behind an RBD LUN).
	server, daemon *os.Process
	cluster        []*os.Process
}

// A sample is one measurement.
type sample struct {
	iops      float64
	bps       float64 // octets per second
	ios       float64
	clientCPU float64 // seconds
	serverCPU float64
}

const (
	serverCPU = "0"
	clientCPU = "1"
	iqn       = "iqn.2026-11.io.ddpstore:compare"
)

type harness struct {
	o       *options
	dir     string // tmpfs work directory
	image   string
	procs   []*exec.Cmd // to stop at the end, in reverse
	mounted []string    // mount points to unmount
	stops   []func()    // what else to stop at the end (the Ceph cluster)
	notes   []string
}

func (h *harness) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	h.notes = append(h.notes, s)
	fmt.Fprintln(os.Stderr, "compare: "+s)
}

// pinned returns argv prefixed with taskset for cpu when pinning.
func (h *harness) pinned(cpu string, argv ...string) []string {
	if !h.o.pin {
		return argv
	}
	return append([]string{"taskset", "-c", cpu}, argv...)
}

func run(ctx context.Context, o *options) error {
	for _, tool := range []string{"nbdkit", "fio", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (make compare installs it with apt)", tool)
		}
	}
	for _, b := range []string{"ddptarget", "ddpinitiator"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("%s: %v (make build first)", filepath.Join(o.bin, b), err)
		}
	}
	sel, err := selectPatterns(o.patterns)
	if err != nil {
		return err
	}
	h := &harness{o: o}
	defer h.cleanup()
	if h.dir, err = os.MkdirTemp("/dev/shm", "ddpcompare-"); err != nil {
		return err
	}
	h.image = filepath.Join(h.dir, "image")
	if err := fillImage(h.image, o.size); err != nil {
		return err
	}
	if !o.pin {
		h.note("not pinned: servers and clients share every CPU")
	}
	systems, err := h.start(ctx)
	if err != nil {
		return err
	}
	res := newResults(sel, systems)
	for r := 0; r < o.runs; r++ {
		lim, err := h.limits(ctx)
		if err != nil {
			return err
		}
		res.limits = append(res.limits, lim)
		for pi, p := range sel {
			for k := range systems {
				s := systems[(k+r+pi)%len(systems)] // rotate who goes first
				if ctx.Err() != nil {
					return ctx.Err()
				}
				smp, err := h.measure(ctx, s, p)
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.name, p.name, err)
				}
				res.add(p.name, s.name, smp)
				fmt.Fprintf(os.Stderr, "run %d/%d %-18s %-15s %9.0f IOPS %8.1f MB/s\n", r+1, o.runs, p.name, s.name, smp.iops, smp.bps/1e6)
			}
		}
	}
	res.notes = h.notes
	res.o = o
	return res.write()
}

func selectPatterns(list string) ([]pattern, error) {
	if list == "all" {
		return patterns, nil
	}
	var sel []pattern
	for _, n := range strings.Split(list, ",") {
		found := false
		for _, p := range patterns {
			if p.name == n {
				sel, found = append(sel, p), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no pattern %q", n)
		}
	}
	return sel, nil
}

// fillImage writes size octets of non-zero data, so that reads read data
// rather than holes.
func fillImage(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// start starts both servers and, when it can, both mounts.
func (h *harness) start(ctx context.Context) ([]*system, error) {
	o := h.o
	nbd, err := h.spawn(h.pinned(serverCPU, "nbdkit", "-f", "-i", "127.0.0.1", "-p", strconv.Itoa(o.nbdPort), "file", h.image), "nbdkit.log")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(h.dir, "target.yaml")
	yaml := fmt.Sprintf("portals:\n  - listen: 127.0.0.1:%d\n  - {listen: 127.0.0.1:%d, transport: iscsi-tcp}\ntargets:\n  - name: %s\n    luns:\n      - {id: 0, path: %s}\nlimits: {queue_depth: 128}\nlog: {level: warn}\ncontrol: {socket: %s}\n",
		o.ddpPort, o.iscsiPort, iqn, h.image, filepath.Join(h.dir, "ddptarget.sock"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	ddp, err := h.spawn(h.pinned(serverCPU, filepath.Join(o.bin, "ddptarget"), "--config", cfg), "ddptarget.log")
	if err != nil {
		return nil, err
	}
	for _, port := range []int{o.nbdPort, o.ddpPort, o.iscsiPort} {
		if err := waitPort(ctx, port); err != nil {
			return nil, err
		}
	}
	if err := h.startLimits(ctx); err != nil {
		return nil, err
	}
	nbdURI := fmt.Sprintf("nbd://127.0.0.1:%d", o.nbdPort)
	portal := fmt.Sprintf("127.0.0.1:%d", o.ddpPort)
	systems := []*system{
		{name: "nbdkit", server: nbd.Process, run: func(ctx context.Context, p pattern) (sample, error) {
			return h.fio(ctx, p, "--ioengine=nbd", "--uri="+nbdURI)
		}},
		{name: "ddpstore", server: ddp.Process, run: func(ctx context.Context, p pattern) (sample, error) {
			return h.bench(ctx, p, portal)
		}},
		// The same target and LU over iSCSI without iSER: what direct
		// placement is worth, measured rather than claimed.
		{name: "ddpstore-iscsi-tcp", server: ddp.Process, run: func(ctx context.Context, p pattern) (sample, error) {
			return h.bench(ctx, p, fmt.Sprintf("127.0.0.1:%d", o.iscsiPort), "--transport", "iscsi-tcp")
		}},
	}
	switch {
	case !o.rbd:
		h.note("RBD LUN not measured: --rbd=false")
	default:
		sys, err := h.startRBD(ctx)
		if err != nil {
			return nil, fmt.Errorf("the RBD LUN (--rbd=false leaves it out): %w", err)
		}
		systems = append(systems, sys)
	}
	why := ""
	switch {
	case !o.mounts:
		why = "--mounts=false"
	case os.Geteuid() != 0:
		why = "not root (the mounts are made directly)"
	default:
		if _, err := os.Stat("/dev/fuse"); err != nil {
			why = "this kernel has no FUSE (/dev/fuse)"
		} else if _, err := exec.LookPath("nbdfuse"); err != nil {
			why = "nbdfuse is not installed"
		}
	}
	if why != "" {
		h.note("mounts not measured: %s", why)
		return systems, nil
	}
	mntN := filepath.Join(h.dir, "nbdfuse")
	mntD := filepath.Join(h.dir, "ddpmount")
	for _, m := range []string{mntN, mntD} {
		if err := os.Mkdir(m, 0o755); err != nil {
			return nil, err
		}
	}
	nf, err := h.spawn(h.pinned(clientCPU, "nbdfuse", mntN+"/nbd", "--tcp", "127.0.0.1", strconv.Itoa(o.nbdPort)), "nbdfuse.log")
	if err != nil {
		return nil, err
	}
	if err := h.waitMount(ctx, mntN, nf); err != nil {
		return nil, err
	}
	dm, err := h.spawn(h.pinned(clientCPU, filepath.Join(o.bin, "ddpinitiator"), "mount", "--target", iqn, portal, mntD), "ddpmount.log")
	if err != nil {
		return nil, err
	}
	if err := h.waitMount(ctx, mntD, dm); err != nil {
		return nil, err
	}
	systems = append(systems,
		&system{name: "nbdfuse", server: nbd.Process, daemon: nf.Process, run: func(ctx context.Context, p pattern) (sample, error) {
			return h.fio(ctx, p, "--ioengine=libaio", "--direct=1", "--filename="+mntN+"/nbd")
		}},
		&system{name: "ddpstore-mount", server: ddp.Process, daemon: dm.Process, run: func(ctx context.Context, p pattern) (sample, error) {
			return h.fio(ctx, p, "--ioengine=libaio", "--direct=1", "--filename="+mntD+"/lun0")
		}})
	return systems, nil
}

// spawn starts a long-running process with its output in dir/log.
func (h *harness) spawn(argv []string, log string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(h.dir, log))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	f.Close()
	h.procs = append(h.procs, cmd)
	return cmd, nil
}

func waitPort(ctx context.Context, port int) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := (&netDialer).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on 127.0.0.1:%d after 20s", port)
}

func (h *harness) waitMount(ctx context.Context, mnt string, cmd *exec.Cmd) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile("/proc/mounts"); err == nil && bytes.Contains(b, []byte(" "+mnt+" ")) {
			h.mounted = append(h.mounted, mnt)
			return nil
		}
		if cmd.ProcessState != nil || syscall.Kill(cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(h.dir, filepath.Base(mnt)+".log"))
	return fmt.Errorf("%s did not mount: %s", mnt, strings.TrimSpace(string(log)))
}

// cleanup unmounts, stops every process and removes the image.
func (h *harness) cleanup() {
	for i := len(h.mounted) - 1; i >= 0; i-- {
		if err := syscall.Unmount(h.mounted[i], 0); err != nil {
			syscall.Unmount(h.mounted[i], syscall.MNT_DETACH)
		}
	}
	for i := len(h.procs) - 1; i >= 0; i-- {
		p := h.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	for i := len(h.stops) - 1; i >= 0; i-- {
		h.stops[i]()
	}
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
}

// measure runs one sample, adding the CPU time the server and the FUSE
// daemon spent meanwhile.
func (h *harness) measure(ctx context.Context, s *system, p pattern) (sample, error) {
	s0 := procCPU(s.server)
	for _, c := range s.cluster {
		s0 += procCPU(c)
	}
	d0 := procCPU(s.daemon)
	smp, err := s.run(ctx, p)
	if err != nil {
		return smp, err
	}
	smp.serverCPU = procCPU(s.server) - s0
	for _, c := range s.cluster {
		smp.serverCPU += procCPU(c)
	}
	smp.clientCPU += procCPU(s.daemon) - d0
	return smp, nil
}

// procCPU is a process's user and system time so far, in seconds.
func procCPU(p *os.Process) float64 {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name: utime is the 12th.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// Linux for every architecture Go supports.
const clockTicks = 100

// client runs a client to completion and returns its output and CPU time.
func (h *harness) client(ctx context.Context, argv []string) ([]byte, float64, error) {
	argv = h.pinned(clientCPU, argv...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	cpu := 0.0
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), cpu, nil
}

func (h *harness) fio(ctx context.Context, p pattern, args ...string) (sample, error) {
	argv := append([]string{"fio", "--name=compare", "--thread", "--group_reporting", "--output-format=json",
		"--rw=" + p.rw, "--bs=" + strconv.Itoa(p.bs), "--iodepth=" + strconv.Itoa(p.qd),
		"--size=" + strconv.FormatInt(h.o.size, 10), "--time_based", "--runtime=" + fmt.Sprintf("%dms", h.o.runtime.Milliseconds()),
		"--randrepeat=0", "--norandommap"}, args...)
	out, cpu, err := h.client(ctx, argv)
	if err != nil {
		return sample{}, err
	}
	// fio may print warnings before its JSON.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var r struct {
		Jobs []struct {
			Read, Write struct {
				IOPS     float64 `json:"iops"`
				BW       float64 `json:"bw_bytes"`
				TotalIOs float64 `json:"total_ios"`
			}
			Error int `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return sample{}, fmt.Errorf("fio's JSON: %v", err)
	}
	if len(r.Jobs) != 1 || r.Jobs[0].Error != 0 {
		return sample{}, errors.New("fio reported an error")
	}
	j := r.Jobs[0]
	return sample{iops: j.Read.IOPS + j.Write.IOPS, bps: j.Read.BW + j.Write.BW,
		ios: j.Read.TotalIOs + j.Write.TotalIOs, clientCPU: cpu}, nil
}

func (h *harness) bench(ctx context.Context, p pattern, portal string, extra ...string) (sample, error) {
	argv := []string{filepath.Join(h.o.bin, "ddpinitiator"), "bench", "--target", iqn, "--json",
		"--rw", p.rw, "--bs", sizeArg(p.bs), "--iodepth", strconv.Itoa(p.qd),
		"--runtime", h.o.runtime.String()}
	argv = append(append(argv, extra...), portal)
	out, cpu, err := h.client(ctx, argv)
	if err != nil {
		return sample{}, err
	}
	var r struct {
		IOPS float64 `json:"iops"`
		MBps float64 `json:"mb_per_s"`
		IOs  float64 `json:"ios"`
		Errs int     `json:"verify_errors"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return sample{}, fmt.Errorf("ddpinitiator bench's JSON: %v", err)
	}
	return sample{iops: r.IOPS, bps: r.MBps * 1e6, ios: r.IOs, clientCPU: cpu}, nil
}

// sizeArg writes a block size as 4KiB or 1MiB.
func sizeArg(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.Itoa(n)
}
