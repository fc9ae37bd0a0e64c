#!/bin/sh
# mpirun's remote shell for the test hosts (scripts/netns-hosts.sh): called as AGENT HOST CMD...,
# it runs CMD in HOST's network namespace with a hostname of its own (OpenMPI keys its session
# directories by hostname, and the library tells hosts apart by it).
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host; $*"
