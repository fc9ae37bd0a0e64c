#!/bin/sh
# Test hosts on one machine: Linux network namespaces (iproute2), each with a veth link to a
# bridge, addressed in 198.18.0.0/15 (RFC 2544's range for network benchmarks), so that
# multi-host runs cross a real TCP/IP stack instead of shared memory.
#
#   scripts/netns-hosts.sh up N [PREFIX [NET]]   make hosts PREFIX1..PREFIXN (198.18.NET.1..N/24)
#                                                on bridge PREFIXbr (198.18.NET.254 here)
#   scripts/netns-hosts.sh down [PREFIX]         remove them
#   scripts/netns-hosts.sh limit RATE [PREFIX]   cap every host's link (tc tbf), e.g. 400mbit
#   scripts/netns-hosts.sh check                 exit 0 when hosts can be made here, else say why
#
# PREFIX defaults to spmdh, NET to 0. mpirun reaches the hosts through scripts/netns-rsh.sh;
# scripts/mpirun-hosts.sh runs a program on them. Needs root and iproute2.
set -eu
cmd=${1:-}
[ $# -gt 0 ] && shift

check() {
  if [ "$(id -u)" != 0 ]; then echo "test hosts need root (network namespaces)"; return 1; fi
  if ! command -v ip >/dev/null 2>&1; then echo "test hosts need iproute2 (ip)"; return 1; fi
  if ! command -v unshare >/dev/null 2>&1; then echo "test hosts need unshare (util-linux)"; return 1; fi
  probe=spmdprobe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "this machine refuses network namespaces (ip netns add failed)"; return 1
  fi
  ok=0
  if ip link add "spb$$" type bridge 2>/dev/null; then
    if ip link add "spv$$" type veth peer name eth0 netns "$probe" 2>/dev/null; then
      ip link set "spv$$" master "spb$$" 2>/dev/null && ok=1
      ip link del "spv$$" 2>/dev/null
    fi
    ip link del "spb$$" 2>/dev/null
  fi
  ip netns del "$probe"
  if [ $ok = 0 ]; then
    echo "this machine refuses bridges or veth links (ip link add failed)"; return 1
  fi
}

case "$cmd" in
  check)
    check
    ;;
  up)
    n=${1:?usage: netns-hosts.sh up N [PREFIX [NET]]}
    prefix=${2:-spmdh}
    net=${3:-0}
    check >&2 || exit 1
    "$0" down "$prefix" 2>/dev/null || true
    br=${prefix}br
    ip link add "$br" type bridge
    ip addr add "198.18.$net.254/24" dev "$br"
    ip link set "$br" up
    i=1
    while [ "$i" -le "$n" ]; do
      host=$prefix$i
      ip netns add "$host"
      ip link add "${prefix}v$i" type veth peer name eth0 netns "$host"
      ip link set "${prefix}v$i" master "$br"
      ip link set "${prefix}v$i" up
      ip -n "$host" addr add "198.18.$net.$i/24" dev eth0
      ip -n "$host" link set eth0 up
      ip -n "$host" link set lo up
      i=$((i + 1))
    done
    ;;
  down)
    prefix=${1:-spmdh}
    # (The links first: deleting a namespace frees its end of a veth pair only later.)
    for link in $(ip -o link show | sed -n "s/^[0-9]*: \(${prefix}v[0-9][0-9]*\)@.*/\1/p"); do
      ip link del "$link" 2>/dev/null || true
    done
    for host in $(ip netns list | awk '{print $1}' | grep "^$prefix[0-9][0-9]*$" || true); do
      # (what still runs there: a launcher's daemon that lost its link, a stopped process)
      for pid in $(ip netns pids "$host" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip netns del "$host"
    done
    ip link del "${prefix}br" 2>/dev/null || true
    ;;
  limit)
    rate=${1:?usage: netns-hosts.sh limit RATE [PREFIX]}
    prefix=${2:-spmdh}
    for host in $(ip netns list | awk '{print $1}' | grep "^$prefix[0-9][0-9]*$"); do
      ip netns exec "$host" tc qdisc replace dev eth0 root tbf rate "$rate" burst 256kbit latency 50ms
    done
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
