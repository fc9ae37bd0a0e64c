#!/bin/sh
# Faults between test hosts (scripts/netns-hosts.sh), on the training example across 2 hosts:
#   flap     host 2's link down for 0.5 s mid-run and back: TCP recovers, the parameters equal
#            those of a run without the fault, bit for bit;
#   down     host 2's link down for good: process 0 stops with an error naming host 2 within
#            SPMD_COLLECTIVE_TIMEOUT (plus start-up slack), and no training process is left;
#   stop     host 2's process stopped (SIGSTOP): the same;
#   kill     host 2's process killed: the same, or mpirun ends the job at once naming the host;
#   trickle  host 2's link limited to 16 Mbit/s, so one step's all-reduce takes longer than
#            SPMD_COLLECTIVE_TIMEOUT: the run finishes (no false timeout while bytes move).
#
#   tests/hosts/faults.sh FAULT EXAMPLE COMPARE WORK_DIR    (hosts spmdx1, spmdx2 on 198.18.20.0/24
#                                                          must be up: tests/hosts/with_hosts.sh)
set -u
fault=$1 example=$2 compare=$3 work=$4
scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
prefix=spmdx net=20
mkdir -p "$work"
log=$work/$fault.log
run() {  # run LOG ARGS...: the example on the 2 hosts, one device each
  out=$1
  shift
  SPMD_CPU_DEVICES=1 "$scripts/mpirun-hosts.sh" 2 $prefix $net -- "$example" --devices 1 \
    --no-progress "$@" >"$out" 2>&1
}
example_pids() {  # the example's processes still on any host
  for h in ${prefix}1 ${prefix}2; do ip netns pids "$h"; done | while read -r pid; do
    case "$(cat /proc/"$pid"/comm 2>/dev/null)" in mnist_data_par*) echo "$pid" ;; esac
  done
}
wait_for_start() {  # until the log shows training started (at most 60 s)
  i=0
  while ! grep -q "^training" "$1" 2>/dev/null; do
    sleep 0.2
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "FAIL: training did not start"; cat "$1"; exit 1; }
  done
}
cleanup() { pkill -9 -f "mpirun.*$prefix" 2>/dev/null || true; }
trap cleanup EXIT

case "$fault" in
  flap)
    args="--epochs 2 --train-limit 4096 --test-limit 500"
    rm -f "$work/clean.ckpt" "$work/flap.ckpt"
    # shellcheck disable=SC2086
    run "$work/clean.log" $args --checkpoint "$work/clean.ckpt" || { cat "$work/clean.log"; exit 1; }
    (
      wait_for_start "$log"
      sleep 1
      ip link set ${prefix}v2 down
      sleep 0.5
      ip link set ${prefix}v2 up
      echo "link of ${prefix}2 down for 0.5 s"
    ) &
    # shellcheck disable=SC2086
    SPMD_COLLECTIVE_TIMEOUT=60 run "$log" $args --checkpoint "$work/flap.ckpt"
    rc=$?
    wait
    cat "$log"
    [ $rc -eq 0 ] || { echo "FAIL: the run with a link flap failed (exit status $rc)"; exit 1; }
    "$compare" "$work/clean.ckpt" "$work/flap.ckpt" 0 || { echo "FAIL: results differ"; exit 1; }
    echo "PASS: the run survived the flap with the same parameters"
    ;;
  down | stop | kill)
    limit=8
    SPMD_COLLECTIVE_TIMEOUT=$limit run "$log" --epochs 20 &
    wait_for_start "$log"
    sleep 1
    case "$fault" in
      down) ip link set ${prefix}v2 down ;;
      stop | kill)
        victim=$(ip netns pids ${prefix}2 | while read -r pid; do
          case "$(cat /proc/"$pid"/comm 2>/dev/null)" in mnist_data_par*) echo "$pid" ;; esac
        done | head -1)
        [ -n "$victim" ] || { echo "FAIL: no training process on ${prefix}2"; exit 1; }
        [ "$fault" = stop ] && kill -STOP "$victim" || kill -9 "$victim"
        ;;
    esac
    start=$(date +%s)
    # Process 0 must stop with an error naming host 2 within the timeout (and some slack).
    while :; do
      now=$(date +%s)
      if grep -q "error: .*process(es)* 1 (host ${prefix}2)" "$log"; then break; fi
      # (A killed process: the launcher ends the job at once, naming the host.)
      if [ "$fault" = kill ] && grep -q "on node ${prefix}2 exited on signal 9" "$log"; then break; fi
      if [ $((now - start)) -gt $((limit + 20)) ]; then
        cat "$log"
        echo "FAIL: no error naming host ${prefix}2 within $((limit + 20)) s"
        exit 1
      fi
      sleep 0.5
    done
    elapsed=$(( $(date +%s) - start ))
    # ...and every training process must be gone (but a stopped one, which cannot run).
    i=0
    while [ -n "$(example_pids)" ] && [ "$fault" != stop ]; do
      sleep 0.5
      i=$((i + 1))
      [ $i -gt 40 ] && { echo "FAIL: training processes left: $(example_pids)"; exit 1; }
    done
    grep -E "error:|exited on signal" "$log"
    echo "PASS: stopped with an error naming ${prefix}2 after ${elapsed} s (timeout $limit s)"
    ;;
  trickle)
    "$scripts/netns-hosts.sh" limit 16mbit $prefix
    start=$(date +%s)
    SPMD_COLLECTIVE_TIMEOUT=2 run "$log" --epochs 1 --train-limit 256 --test-limit 100
    rc=$?
    cat "$log"
    [ $rc -eq 0 ] || { echo "FAIL: the run on a trickle failed (exit status $rc)"; exit 1; }
    echo "PASS: 2 steps over a 16 Mbit/s link in $(( $(date +%s) - start )) s with a 2 s timeout"
    ;;
  *)
    echo "unknown fault $fault"
    exit 2
    ;;
esac
