#!/bin/sh
# Runs a program under mpirun on N test hosts (scripts/netns-hosts.sh), one process per host,
# over TCP between the hosts only:
#
#   scripts/mpirun-hosts.sh N [PREFIX [NET]] -- PROGRAM ARGS...
#
# Environment variables named in SPMD_HOSTS_ENV (space-separated) are passed to every process,
# as are SPMD_* variables set here. The hosts must be up.
set -eu
n=${1:?usage: mpirun-hosts.sh N [PREFIX [NET]] -- PROGRAM ARGS...}
shift
prefix=spmdh
net=0
if [ "${1:-}" != "--" ]; then prefix=$1; shift; fi
if [ "${1:-}" != "--" ]; then net=$1; shift; fi
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
hosts=""
i=1
while [ "$i" -le "$n" ]; do
  hosts="$hosts${hosts:+,}$prefix$i"
  i=$((i + 1))
done
env_flags=""
for v in $(env | sed -n 's/^\(SPMD_[A-Z0-9_]*\)=.*/\1/p') ${SPMD_HOSTS_ENV:-}; do
  env_flags="$env_flags -x $v"
done
# shellcheck disable=SC2086
exec mpirun --allow-run-as-root -np "$n" -H "$hosts" \
  --mca plm_rsh_agent "$here/netns-rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca pml ob1 --mca btl tcp,self \
  --mca oob_tcp_if_include "198.18.$net.0/24" --mca btl_tcp_if_include "198.18.$net.0/24" \
  $env_flags "$@"
