#!/usr/bin/env bash
# Installs what integration/tgt tests ddpinitiator against, when missing:
# Linux's user-space SCSI target tgtd and its tgtadm (Debian package tgt).
# Debian/Ubuntu, as root; otherwise says what is missing and exits 1. The
# test runs this script and skips, with its message, when it fails. The
# package's own service is not needed: the test runs its own tgtd.
set -euo pipefail
need=()
for t in tgtd:tgt tgtadm:tgt; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "tgt.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 1
fi
echo "tgt.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
