#!/usr/bin/env bash
# Installs what `make compare` measures against and with, when missing:
# nbdkit (the peer server), libnbd-bin and nbdfuse (its mount), fio (the
# client), iperf3 (the TCP limit) and gnuplot (the chart). Debian/Ubuntu,
# as root; otherwise says what is missing and exits 1.
set -euo pipefail
need=()
for t in nbdkit:nbdkit nbdinfo:libnbd-bin nbdfuse:nbdfuse fio:fio iperf3:iperf3 gnuplot:gnuplot-nox; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "peers.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 1
fi
echo "peers.sh: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
