#!/usr/bin/python3
"""NumPy baseline of bench_dot10m: row-wise dot products of two (n, 3) float32 arrays.

Prints one line per measurement, "<name>_ms <median milliseconds>", for the C++ benchmark to
parse. Run it with Debian's interpreter (/usr/bin/python3) and without OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE in the environment (they slow NumPy down on some processors).
"""
import argparse

import numpy as np

from numpy_timing import median_ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--reps", type=int, default=11)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = rng.random((args.n, 3), dtype=np.float32)
    b = rng.random((args.n, 3), dtype=np.float32)
    # Check the result once against a float64 computation, so a wrong answer is never timed.
    ref = (a.astype(np.float64) * b.astype(np.float64)).sum(1)
    if not np.allclose(np.einsum("ij,ij->i", a, b), ref, rtol=1e-5, atol=1e-6):
        raise SystemExit("einsum result differs from the float64 reference")
    print(f"numpy_version {np.__version__}")
    print(f"einsum_ms {median_ms(lambda: np.einsum('ij,ij->i', a, b), args.reps):.3f}")
    print(f"mulsum_ms {median_ms(lambda: (a * b).sum(1), args.reps):.3f}", flush=True)


if __name__ == "__main__":
    main()
