"""The JAX baselines' shared setup and timing (bench/jax/jax_*.py import it first).

Each script is the JAX counterpart of one C++ benchmark (bench/bench_<name>.cpp -> jax_<name>.py):
the same workloads, written as a JAX user writes them (jax.jit, jax.pmap, jax.shard_map, lax
loops), timed as the C++ benchmark times them (the same sizes, a warm-up, block_until_ready,
medians). Each checks its results once against NumPy before timing, so a wrong answer is never
timed, and prints "jax_version <v>" and one "<workload>_ms <median milliseconds>" line per
workload (milliseconds everywhere, µs-scale values included), which bench_util.h's
run_jax_script reads. The C++ side prints spmd's time over these.

Devices and threads: importing this module sets XLA_FLAGS=--xla_force_host_platform_device_count=8
before jax is imported (8 emulated CPU devices, as spmd::set_cpu_device_count(8)). XLA:CPU runs
each computation's work on its intra-op thread pool, one thread per core of the machine (2 on
the benchmark machine), shared by the 8 emulated devices; spmd's CPU work uses the same number of
threads (spmd::cpu::hardware_threads()). Run the scripts with build/venv/bin/python
(scripts/install-bench-deps.sh makes it).
"""
import argparse
import os
import statistics
import sys
import time

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after XLA_FLAGS)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["jax", "jnp", "np", "start", "report", "check", "ready", "median_ms", "dispatch_ms",
           "shard_rows"]


def start(**options):
    """Parses the command line's integer options (--name N, the keywords giving their defaults:
    the C++ benchmark's sizes), prints the version line and returns the options. Call it first."""
    parser = argparse.ArgumentParser()
    for name, default in options.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    print(f"jax_version {jax.__version__}", flush=True)
    return args


def report(name, ms):
    """One "<name>_ms <median ms>" line (general format: µs-scale values keep their digits)."""
    print(f"{name}_ms {ms:.6g}", flush=True)


def check(what, got, want, rtol=1e-5, atol=1e-6):
    """Exits (so nothing is timed) unless got is close to want, elementwise."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        diff = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        sys.exit(f"WRONG RESULT from {what}: {got.shape} vs {want.shape}, max diff {diff}")


def ready(x):
    """Waits until every array in the pytree x is computed (JAX dispatches asynchronously)."""
    return jax.block_until_ready(x)


def median_ms(fn, reps, warmup=1, per=1):
    """Median wall-clock ms of ready(fn()) over reps calls after warm-up calls, divided by per
    (the steps or iterations one call runs)."""
    for _ in range(warmup):
        ready(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        ready(fn())
        times.append((time.perf_counter() - t0) * 1e3 / per)
    return statistics.median(times)


def _per_call_ms(fn, batches, calls):
    """Median over batches of the mean ms of one call within a batch of calls (as
    bench_util.h's per_call_us)."""
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(times)


def dispatch_ms(fn, batches, calls, rounds):
    """Per-call ms of a cached call, each call waited for (ready(fn())): two warm-up batches,
    then the median of `rounds` rounds of _per_call_ms."""
    call = lambda: ready(fn())  # noqa: E731
    _per_call_ms(call, 2, calls)
    return statistics.median(_per_call_ms(call, batches, calls) for _ in range(rounds))


def shard_rows(a):
    """a (n, ...) as a pmap-sharded array, row i on device i (placed once, before timing)."""
    return jax.pmap(lambda t: t)(np.asarray(a))
