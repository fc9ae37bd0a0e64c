#!/usr/bin/python3
"""PyTorch eager baseline of bench_fused: layer norm over the last axis (eps 1e-5, gain and bias)
followed by the tanh-approximated GELU, on a (rows, cols) float32 input.

The input, gain and bias are the same formulas bench_fused uses (exact in float32), so the sum
of the output checks the result. Prints "torch_version <v>", "threads <intra-op threads>",
"checksum <sum of the output in float64>" and "ms <milliseconds per call>" for every timed
call, for the C++ benchmark to parse.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def inputs(rows, cols):
    i = torch.arange(rows, dtype=torch.int64).reshape(rows, 1)
    j = torch.arange(cols, dtype=torch.int64).reshape(1, cols)
    x = ((i * 131 + j * 71) % 1000).to(torch.float32) / 250.0 - 2.0
    jj = torch.arange(cols, dtype=torch.int64)
    gain = 1.0 + (jj % 7).to(torch.float32) * 0.125
    bias = (jj % 5).to(torch.float32) * 0.25 - 0.5
    return x.contiguous(), gain, bias


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: default)")
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    x, gain, bias = inputs(args.rows, args.cols)

    def run():
        y = F.layer_norm(x, (args.cols,), gain, bias, eps=1e-5)
        return F.gelu(y, approximate="tanh")

    with torch.no_grad():
        out = run()
        for _ in range(args.warmup):
            run()
        print(f"torch_version {torch.__version__}")
        print(f"threads {torch.get_num_threads()}")
        print(f"checksum {out.double().sum().item():.6f}")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            run()
            print(f"ms {(time.perf_counter() - t0) * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main()
