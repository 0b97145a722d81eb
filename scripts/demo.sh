#!/usr/bin/env bash
# The `make run` demo: ddptarget on its embedded default (one 1 GiB memory
# LUN on 127.0.0.1:3260), then ddpinitiator discovers it, logs in, and
# drives verified random I/O and sequential reads against it over iSER on
# the software RNIC. Exits non-zero if any step fails.
set -euo pipefail
bin=${1:-bin}
portal=127.0.0.1:3260

if (exec 3<>/dev/tcp/127.0.0.1/3260) 2>/dev/null; then
	echo "demo: something already listens on $portal; stop it first" >&2
	exit 1
fi

log=$(mktemp)
"$bin/ddptarget" >"$log" 2>&1 &
target=$!
cleanup() {
	kill -INT "$target" 2>/dev/null || true
	wait "$target" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT

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

kill -INT "$target"
if wait "$target"; then
	echo; echo "demo: ddptarget shut down cleanly; its log:"
	sed 's/^/  /' "$log"
else
	echo "demo: ddptarget exited with status $?:" >&2
	cat "$log" >&2
	exit 1
fi
trap - EXIT
rm -f "$log"
