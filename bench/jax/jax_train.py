"""JAX counterpart of bench_train: one training step of a 784-1024-1024-10 ReLU MLP
(cross-entropy, SGD with momentum 0.9, lr 0.05, float32, global batch 128, random data of MNIST's
shape), written as a JAX user writes it:
  - train_first_call: a fresh jax.jit of the step, from the call to its first result (trace,
    lower, compile, one step); the first computation of the process after the data is placed;
  - train_step_1dev: jax.jit(step) on one device;
  - train_step_8dev: jax.pmap(step, axis_name="batch") over 8 devices, 16 samples each, the
    gradients lax.psum'ed, the parameters and momenta replicated (one copy per device).
Each run takes 50 steps over 4 batches cycled (waited for at the end); median ms/step of 5 runs
after 5 warm-up steps; the pmapped steps are each waited for (queued asynchronously, their
psums deadlock XLA:CPU on a 2-core machine, as jax_stencil.py notes). The first step's loss is checked against NumPy, and the 8-device step's
parameters against the 1-device step's.
"""
import time

from jax_timing import check, jax, jnp, median_ms, np, ready, report, shard_rows, start

BATCH, SIZES, LR, MOMENTUM, BATCHES = 128, (784, 1024, 1024, 10), 0.05, 0.9, 4


def loss_fn(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i + 1 < len(params):
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.sum(logp * jax.nn.one_hot(y, SIZES[-1])) / BATCH


def make_step(axis=None):
    def step(params, momenta, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        if axis:
            grads, loss = jax.lax.psum((grads, loss), axis)
        momenta = jax.tree.map(lambda m, g: MOMENTUM * m + g, momenta, grads)
        params = jax.tree.map(lambda p, m: p - LR * m, params, momenta)
        return params, momenta, loss
    return step


def numpy_loss(params, x, y):
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        h = np.maximum(h, 0) if i + 1 < len(params) else h
    h = h - h.max(1, keepdims=True)
    logp = h - np.log(np.exp(h).sum(1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


def runner(step, params, momenta, xs, ys, steps, wait):
    """A run of `steps` steps, continuing the training (wait: each step waited for)."""
    state = [params, momenta]

    def run():
        for i in range(steps):
            out = step(state[0], state[1], xs[i % BATCHES], ys[i % BATCHES])
            state[0], state[1], loss = ready(out) if wait else out
        return state[0], loss
    return run


def main():
    args = start(rounds=5, steps=50)
    rng = np.random.default_rng(0)
    params = [((rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32),
               np.zeros(n, np.float32)) for m, n in zip(SIZES[:-1], SIZES[1:])]
    momenta = jax.tree.map(np.zeros_like, params)
    xs = [rng.random((BATCH, SIZES[0]), dtype=np.float32) for _ in range(BATCHES)]
    ys = [rng.integers(0, SIZES[-1], BATCH).astype(np.int32) for _ in range(BATCHES)]
    p1, m1 = jax.device_put(params), jax.device_put(momenta)
    x1, y1 = ready(jax.device_put(xs)), ready(jax.device_put(ys))

    t0 = time.perf_counter()
    step1 = jax.jit(make_step())
    first = ready(step1(p1, m1, x1[0], y1[0]))
    report("train_first_call", (time.perf_counter() - t0) * 1e3)
    check("1-device step's loss vs NumPy", first[2], numpy_loss(params, xs[0], ys[0]), 1e-5)

    n = 8
    rep = lambda t: shard_rows(np.broadcast_to(t, (n,) + t.shape))  # noqa: E731
    p8, m8 = jax.tree.map(rep, params), jax.tree.map(rep, momenta)
    x8 = [shard_rows(x.reshape(n, BATCH // n, -1)) for x in xs]
    y8 = [shard_rows(y.reshape(n, BATCH // n)) for y in ys]
    step8 = jax.pmap(make_step("batch"), axis_name="batch")
    out8 = step8(p8, m8, x8[0], y8[0])
    for got, want in zip(jax.tree.leaves(out8[0]), jax.tree.leaves(first[0])):
        check("8-device step vs 1 device", np.asarray(got)[0], want, 1e-4, 1e-5)

    for name, step, p, m, bx, by in (("1dev", step1, p1, m1, x1, y1),
                                     ("8dev", step8, p8, m8, x8, y8)):
        run = runner(step, p, m, bx, by, args.steps, name == "8dev")
        runner(step, p, m, bx, by, 5, True)()  # warm-up
        report(f"train_step_{name}", median_ms(run, args.rounds, warmup=0, per=args.steps))


if __name__ == "__main__":
    main()
