package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/ddpstore/ddpstore/internal/cephtest"
)

// rbdIQN is the target of the RBD LUN, served by a ddptarget of its own.
const rbdIQN = "iqn.2026-11.io.ddpstore:compare-rbd"

// startRBD starts a single-node Ceph (memstore, on the server CPU), an
// image the size of the file LUN's, and a second ddptarget exporting it,
// and returns the system that measures it with ddpinitiator bench: the
// RBD LUN's throughput beside the file LUN's. The cluster's daemons count
// as the server's CPU.
func (h *harness) startRBD(ctx context.Context) (*system, error) {
	o := h.o
	dir := filepath.Join(h.dir, "ceph")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := cephtest.Launch(dir)
	if err != nil {
		return nil, err
	}
	h.stops = append(h.stops, c.Stop)
	var cluster []*os.Process
	for _, pid := range c.PIDs() {
		if o.pin {
			// Every thread of the daemon, already running.
			if out, err := exec.CommandContext(ctx, "taskset", "-a", "-p", "-c", serverCPU, strconv.Itoa(pid)).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("taskset of ceph pid %d: %v: %s", pid, err, out)
			}
		}
		p, _ := os.FindProcess(pid)
		cluster = append(cluster, p)
	}
	// No exclusive-lock: one gateway, but the set-up docs/scale-out.md
	// recommends.
	if out, err := c.Command(ctx, "rbd", "create", "--size", strconv.FormatInt(o.size, 10)+"B", "--image-feature", "layering", c.Pool()+"/compare"); err != nil {
		return nil, fmt.Errorf("rbd create: %v: %s", err, out)
	}
	cfg := filepath.Join(h.dir, "target-rbd.yaml")
	yaml := fmt.Sprintf("portals:\n  - listen: 127.0.0.1:%d\ntargets:\n  - name: %s\n    luns:\n      - {id: 0, rbd: {pool: %s, image: compare, conf: %s, user: %s}}\nlimits: {queue_depth: 128}\nlog: {level: warn}\ncontrol: {socket: %s}\n",
		o.rbdPort, rbdIQN, c.Pool(), c.Conf(), c.User(), filepath.Join(h.dir, "ddptarget-rbd.sock"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	ddp, err := h.spawn(h.pinned(serverCPU, filepath.Join(o.bin, "ddptarget"), "--config", cfg), "ddptarget-rbd.log")
	if err != nil {
		return nil, err
	}
	if err := waitPort(ctx, o.rbdPort); err != nil {
		return nil, err
	}
	portal := fmt.Sprintf("127.0.0.1:%d", o.rbdPort)
	return &system{name: "ddpstore-rbd", server: ddp.Process, cluster: cluster, run: func(ctx context.Context, p pattern) (sample, error) {
		return h.bench(ctx, p, portal, "--target", rbdIQN)
	}}, nil
}
