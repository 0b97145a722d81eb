#!/usr/bin/env bash
# The `make run` demo: ddptarget on its embedded default (one 1 GiB memory
# LUN on 127.0.0.1:3260), then ddpinitiator discovers it, logs in, drives
# verified random I/O and sequential reads against it over iSER on the
# software RNIC, mounts the LUN with FUSE, writes a file through the mount
# and verifies it (with fio, installed with apt when missing), and cleans
# everything up, even when interrupted. Without root the mount part is
# skipped, and the demo says why. Exits non-zero if any step fails.
set -euo pipefail
bin=${1:-bin}
portal=127.0.0.1:3260

if (exec 3<>/dev/tcp/127.0.0.1/3260) 2>/dev/null; then
	echo "demo: something already listens on $portal; stop it first" >&2
	exit 1
fi

log=$(mktemp)
work=$(mktemp -d)
mnt=$work/mnt
"$bin/ddptarget" >"$log" 2>&1 &
target=$!
cleanup() {
	if grep -qs " $mnt fuse.ddpstore " /proc/mounts; then
		"$bin/ddpinitiator" umount --run-dir "$work/run" "$mnt" >/dev/null 2>&1 || umount -l "$mnt" || true
	fi
	kill -INT "$target" 2>/dev/null || true
	wait "$target" 2>/dev/null || true
	rm -rf "$log" "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq 100); do
	(exec 3<>/dev/tcp/127.0.0.1/3260) 2>/dev/null && break
	if ! kill -0 "$target" 2>/dev/null; then
		echo "demo: ddptarget exited:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done

step() { echo; echo "\$ $*"; "$@"; }
step "$bin/ddpinitiator" discover "$portal"
step "$bin/ddpinitiator" login "$portal"
step "$bin/ddpinitiator" bench --rw randrw --bs 4KiB --iodepth 32 --runtime 5s --verify "$portal"
step "$bin/ddpinitiator" bench --rw read --bs 1MiB --iodepth 8 --runtime 3s "$portal"

mounted=
if [ "$(id -u)" != 0 ]; then
	echo; echo "demo: skipping the mount: ddpinitiator mount needs root (FUSE is mounted directly)"
elif [ ! -e /dev/fuse ]; then
	echo; echo "demo: skipping the mount: this kernel has no FUSE (/dev/fuse)"
else
	if ! command -v fio >/dev/null; then
		echo; echo "demo: installing fio"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends fio >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends fio >/dev/null 2>&1; } ||
			echo "demo: apt-get could not install fio; verifying with dd and cmp instead"
	fi
	mkdir -p "$mnt"
	step "$bin/ddpinitiator" mount --daemon --run-dir "$work/run" "$portal" "$mnt"
	step ls -l "$mnt"
	if command -v fio >/dev/null; then
		job=(fio --name=demo --filename="$mnt/lun0" --size=256M --direct=1 --ioengine=libaio --iodepth=16
			--rw=randwrite --bs=64k --verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0)
		echo; echo "\$ ${job[*]}"
		"${job[@]}" | grep -E 'err=|^ +(read|write):'
		verified="fio wrote 256 MiB of random 64 KiB blocks through the mount and verified every CRC32c"
	else
		head -c $((64 << 20)) /dev/urandom >"$work/data"
		step dd if="$work/data" of="$mnt/lun0" bs=1M oflag=direct conv=notrunc status=none
		step cmp -n $((64 << 20)) "$work/data" "$mnt/lun0"
		verified="dd wrote 64 MiB of random data through the mount and cmp read it back the same"
	fi
	step "$bin/ddpinitiator" umount --run-dir "$work/run" "$mnt"
	mounted="$verified"
fi

kill -INT "$target"
if wait "$target"; then
	echo; echo "demo: ddptarget shut down cleanly; its log:"
	sed 's/^/  /' "$log"
	echo; echo "demo summary:"
	echo "  discovery, login, and verified iSER I/O in-process: passed"
	if [ -n "$mounted" ]; then echo "  mount: $mounted"; else echo "  mount: skipped (see above)"; fi
else
	echo "demo: ddptarget exited with status $?:" >&2
	cat "$log" >&2
	exit 1
fi
trap - EXIT
rm -rf "$log" "$work"
