#!/usr/bin/env bash
# Installs what blockdev/rbd builds against and internal/cephtest runs, when
# missing: librbd's and librados's headers (librbd-dev, librados-dev: the
# package's cgo needs them, so `go build ./...` does) and a single-node Ceph
# for the tests (ceph-mon, ceph-osd, ceph-mgr, ceph-common: the daemons, the
# ceph and rbd commands, monmaptool, ceph-authtool). Debian/Ubuntu, as root;
# otherwise says what is missing and exits 1. The packages' services are
# not started or needed: the tests run their own daemons in a temporary
# directory.
set -euo pipefail
need=()
for t in ceph-mon:ceph-mon ceph-osd:ceph-osd ceph-mgr:ceph-mgr ceph:ceph-common rbd:ceph-common \
	monmaptool:ceph-base ceph-authtool:ceph-common; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
for h in /usr/include/rbd/librbd.h:librbd-dev /usr/include/rados/librados.h:librados-dev; do
	[ -e "${h%%:*}" ] || need+=("${h#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "ceph.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 1
fi
echo "ceph.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
