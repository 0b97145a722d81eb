#!/usr/bin/env bash
# Installs what the tests of the operator's tools check with, when missing:
# promtool (Debian package prometheus: `promtool check metrics` on a scrape
# of ddptarget and ddpinitiator) and systemd-analyze (package systemd:
# `systemd-analyze verify` on the units under dist/systemd). Debian/Ubuntu,
# as root; otherwise says what is missing and exits 1. The tests that need
# them run this script and skip that part, with its message, when it fails.
set -euo pipefail
need=()
for t in promtool:prometheus systemd-analyze:systemd; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "opstools.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
	exit 1
fi
echo "opstools.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# --no-install-recommends: promtool comes with the prometheus package, whose
# service is not started in a container without systemd (policy-rc.d aside).
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
