#!/usr/bin/python3
"""NumPy baseline of bench_linalg: cholesky, solve and eigh of one n x n float32 matrix, and of a
stack of small ones, both as a Python loop of NumPy calls (what a vmap replaces) and as NumPy's
own stacked call.

Prints one line per measurement, "<name>_ms <median milliseconds>", for the C++ benchmark to
parse. Run it with Debian's interpreter (/usr/bin/python3) and without OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE in the environment (they slow NumPy down on some processors).
"""
import argparse

import numpy as np

from numpy_timing import median_ms


def spd(rng, shape):
    n = shape[-1]
    m = rng.random(shape, dtype=np.float32) - 0.5
    return (m @ np.swapaxes(m, -1, -2) / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--bn", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = spd(rng, (args.n, args.n))
    b = rng.random(args.n, dtype=np.float32)
    sa = spd(rng, (args.batch, args.bn, args.bn))
    sb = rng.random((args.batch, args.bn), dtype=np.float32)
    # A wrong answer is never timed.
    if not np.allclose(a @ np.linalg.solve(a, b), b, rtol=1e-3, atol=1e-3):
        raise SystemExit("solve result is wrong")
    print(f"numpy_version {np.__version__}")
    r = args.reps
    print(f"cholesky_ms {median_ms(lambda: np.linalg.cholesky(a), r):.3f}")
    print(f"solve_ms {median_ms(lambda: np.linalg.solve(a, b), r):.3f}")
    print(f"eigh_ms {median_ms(lambda: np.linalg.eigh(a), r):.3f}")
    loop = lambda f: lambda: [f(i) for i in range(args.batch)]
    print(f"cholesky_loop_ms {median_ms(loop(lambda i: np.linalg.cholesky(sa[i])), r):.3f}")
    print(f"solve_loop_ms {median_ms(loop(lambda i: np.linalg.solve(sa[i], sb[i])), r):.3f}")
    print(f"eigh_loop_ms {median_ms(loop(lambda i: np.linalg.eigh(sa[i])), r):.3f}")
    print(f"cholesky_stacked_ms {median_ms(lambda: np.linalg.cholesky(sa), r):.3f}")
    print(f"solve_stacked_ms {median_ms(lambda: np.linalg.solve(sa, sb[..., None]), r):.3f}")
    print(f"eigh_stacked_ms {median_ms(lambda: np.linalg.eigh(sa), r):.3f}", flush=True)


if __name__ == "__main__":
    main()
