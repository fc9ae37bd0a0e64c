#!/usr/bin/python3
"""PyTorch eager baseline of bench_conv: forward + backward (gradients of both kernels) of
conv 1->32 3x3 SAME + relu + max_pool 2, conv 32->64 3x3 SAME + relu + max_pool 2, loss = the sum
of the output, on a (batch, 1, 28, 28) float32 input (NCHW, PyTorch's layout; oneDNN on CPU).

The inputs are the formulas bench_conv uses. Prints "torch_version <v>", "threads <n>",
"loss <value>" and "ms <milliseconds per step>" for every timed step.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def inputs(batch):
    n = torch.arange(batch).reshape(batch, 1, 1, 1)
    h = torch.arange(28).reshape(1, 1, 28, 1)
    w = torch.arange(28).reshape(1, 1, 1, 28)
    x = ((n * 131 + h * 71 + w * 17) % 1000).to(torch.float32) / 500.0 - 1.0

    def kernel(o, i, scale):
        oo = torch.arange(o).reshape(o, 1, 1, 1)
        ii = torch.arange(i).reshape(1, i, 1, 1)
        kh = torch.arange(3).reshape(1, 1, 3, 1)
        kw = torch.arange(3).reshape(1, 1, 1, 3)
        return (((oo * 37 + ii * 11 + kh * 5 + kw * 3) % 97).to(torch.float32) / 97.0 - 0.5) * scale

    return x.contiguous(), kernel(32, 1, 0.6), kernel(64, 32, 0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    x, w1, w2 = inputs(args.batch)
    w1.requires_grad_(True)
    w2.requires_grad_(True)

    def step():
        w1.grad = None
        w2.grad = None
        h = F.max_pool2d(F.relu(F.conv2d(x, w1, padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w2, padding=1)), 2)
        loss = h.sum()
        loss.backward()
        return loss

    loss = step()
    for _ in range(args.warmup):
        step()
    print(f"torch_version {torch.__version__}")
    print(f"threads {torch.get_num_threads()}")
    print(f"loss {loss.item():.6f}")
    for _ in range(args.reps):
        t0 = time.perf_counter()
        step()
        print(f"ms {(time.perf_counter() - t0) * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main()
