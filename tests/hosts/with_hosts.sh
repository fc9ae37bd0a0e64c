#!/bin/sh
# Runs COMMAND with N test hosts up (scripts/netns-hosts.sh), taken down after; prints
# "skipped: REASON" and succeeds where test hosts cannot be made (not root, no iproute2, no
# network namespaces), which ctest reports as a skip (SKIP_REGULAR_EXPRESSION).
#
#   tests/hosts/with_hosts.sh N PREFIX NET -- COMMAND ARGS...
set -u
n=$1 prefix=$2 net=$3
shift 3
[ "${1:-}" = "--" ] && shift
scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
if ! why=$("$scripts/netns-hosts.sh" check 2>&1); then
  echo "skipped: $why"
  exit 0
fi
"$scripts/netns-hosts.sh" up "$n" "$prefix" "$net" || { echo "could not make $n test hosts"; exit 1; }
trap '"$scripts/netns-hosts.sh" down "$prefix"' EXIT INT TERM
"$@"
