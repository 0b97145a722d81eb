#!/usr/bin/env bash
# Installs what the conformance tests run against ddptarget, when missing:
# libiscsi's iscsi-test-cu, iscsi-inq and iscsi-readcapacity16 (Debian
# package libiscsi-bin). Debian/Ubuntu, as root; otherwise says what is
# missing and exits 1. The tests run this script and skip, with its
# message, when it fails.
set -euo pipefail
need=()
for t in iscsi-test-cu:libiscsi-bin; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "conformance.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 1
fi
echo "conformance.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
