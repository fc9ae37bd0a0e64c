"""JAX counterpart of bench_stencil: time-stepping stencils as a JAX user writes them, one step
jitted (or pmapped) and called from a Python loop:
  1. 1-D periodic heat equation, 4M float32 points, alpha 0.25, 200 steps: jax.jit of one step
     (heat_jit), and jax.pmap of one step over 8 devices with one-point halos by lax.ppermute
     (heat_pmap8);
  2. 2-D 5-point Jacobi, 4096 x 4096 float32, zero boundary, 20 steps: jit (jacobi_jit) and pmap
     over 8 devices with one-row halos by ppermute (jacobi_pmap8).
Each round runs all the steps from the initial state (waited for at the end); median ms per
step of 3 rounds after a warm-up round. Each result is checked first against NumPy after 3
steps. The pmap steps are each waited for before the next is dispatched: queued asynchronously,
their collective permutes deadlock XLA:CPU on a 2-core machine (the 8 devices' rendezvous waits
for participants that the small thread pool never runs; XLA aborts after 40 s).
"""
from jax_timing import check, jax, jnp, median_ms, np, ready, report, shard_rows, start

lax = jax.lax
DEVICES, ALPHA = 8, 0.25


def heat_step(x):
    left = jnp.concatenate([x[-1:], x[:-1]])
    right = jnp.concatenate([x[1:], x[:1]])
    return x + ALPHA * (left - 2 * x + right)


def heat_pmap_step(x):
    to_next = [(i, (i + 1) % DEVICES) for i in range(DEVICES)]
    to_prev = [(i, (i - 1) % DEVICES) for i in range(DEVICES)]
    left = jnp.concatenate([lax.ppermute(x[-1:], "i", to_next), x[:-1]])
    right = jnp.concatenate([x[1:], lax.ppermute(x[:1], "i", to_prev)])
    return x + ALPHA * (left - 2 * x + right)


def jacobi_of_padded(p):
    return 0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])


def jacobi_step(x):
    return jacobi_of_padded(jnp.pad(x, 1))


def jacobi_pmap_step(x):
    down = [(i, i + 1) for i in range(DEVICES - 1)]
    up = [(i + 1, i) for i in range(DEVICES - 1)]
    top, bottom = lax.ppermute(x[-1:], "i", down), lax.ppermute(x[:1], "i", up)
    return jacobi_of_padded(jnp.pad(jnp.concatenate([top, x, bottom]), ((0, 0), (1, 1))))


def numpy_heat(x):
    return x + np.float32(ALPHA) * (np.roll(x, 1) - 2 * x + np.roll(x, -1))


def numpy_jacobi(x):
    return jacobi_of_padded(np.pad(x, 1))


def bench(name, x0, steps, step, pmap_step, numpy_step, rounds):
    jstep, pstep = jax.jit(step), jax.pmap(pmap_step, axis_name="i")
    xj, xp = jnp.asarray(x0), shard_rows(x0.reshape((DEVICES, -1) + x0.shape[1:]))

    def run(f, x, k, wait=False):
        for _ in range(k):
            x = ready(f(x)) if wait else f(x)
        return x
    want = run(numpy_step, x0, 3)
    check(f"{name} jit", run(jstep, xj, 3), want)
    check(f"{name} pmap", np.asarray(run(pstep, xp, 3, True)).reshape(x0.shape), want)
    report(f"{name}_jit", median_ms(lambda: run(jstep, xj, steps), rounds, per=steps))
    report(f"{name}_pmap8", median_ms(lambda: run(pstep, xp, steps, True), rounds, per=steps))


def main():
    args = start(rounds=3)
    rng = np.random.default_rng(0)
    bench("heat", rng.random(4 * 1024 * 1024, dtype=np.float32), 200, heat_step, heat_pmap_step,
          numpy_heat, args.rounds)
    bench("jacobi", rng.random((4096, 4096), dtype=np.float32), 20, jacobi_step,
          jacobi_pmap_step, numpy_jacobi, args.rounds)


if __name__ == "__main__":
    main()
