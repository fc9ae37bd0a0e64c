#!/usr/bin/python3
"""PyTorch baseline of bench_train: training steps of a 784-1024-1024-10 ReLU MLP (SGD, momentum
0.9, lr 0.05, cross-entropy, float32) on random data of MNIST's shape.

Prints "torch_version <v>", "threads <intra-op threads>", "first_loss <loss of the first step>"
and "ms <milliseconds per step>" for every timed block, the report bench/bench_util.h's
run_torch_script reads. Run
it with Debian's interpreter (/usr/bin/python3), without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in
the environment, and with OMP_WAIT_POLICY set by the caller when wanted (it is read when the
OpenMP runtime starts, before this script runs).
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: default)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=1, help="timed blocks")
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # A few batches of random data of MNIST's shape, cycled (as bench_train does).
    batches = [(torch.rand(args.batch, 784), torch.randint(0, 10, (args.batch,)))
               for _ in range(4)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    first = step(0).item()
    # A wrong model would not train: the loss of a fresh 10-class model is about log(10).
    if not math.isfinite(first) or abs(first - math.log(10)) > 1.0:
        raise SystemExit(f"unexpected first loss {first}")
    for i in range(1, args.warmup):
        step(i)
    print(f"torch_version {torch.__version__}")
    print(f"threads {torch.get_num_threads()}")
    print(f"first_loss {first:.6f}")
    for _ in range(args.blocks):
        t0 = time.perf_counter()
        for i in range(args.steps):
            step(i)
        print(f"ms {(time.perf_counter() - t0) * 1e3 / args.steps:.4f}", flush=True)


if __name__ == "__main__":
    main()
