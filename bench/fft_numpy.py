#!/usr/bin/python3
"""NumPy baseline of bench_fft: numpy.fft (pocketfft) on the same shapes, complex64 / float32
inputs (numpy computes them in double precision and returns complex128 / float64; the times are
numpy's as a user gets them).

Prints "<name>_ms <median milliseconds>" per case and "numpy_version <v>", for the C++ benchmark
to parse. Run it with Debian's interpreter (/usr/bin/python3).
"""
import argparse

import numpy as np

from numpy_timing import median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def c64(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    cases = {
        "fft_1m": (np.fft.fft, c64(1 << 20)),
        "fft_rows": (np.fft.fft, c64(1024, 1024)),
        "rfft_rows": (np.fft.rfft, rng.standard_normal((2048, 1024)).astype(np.float32)),
        "fft2": (np.fft.fft2, c64(1024, 1024)),
        "irfft_rows": (np.fft.irfft, c64(2048, 513)),
        "fft_prime": (np.fft.fft, c64(512, 1009)),
    }
    print("numpy_version", np.__version__)
    for name, (fn, x) in cases.items():
        print(f"{name}_ms {median_ms(lambda: fn(x), args.reps):.4f}", flush=True)


if __name__ == "__main__":
    main()
