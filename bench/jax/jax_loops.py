"""JAX counterpart of bench_loops' per-iteration costs, inside jax.jit:
  1. lax.fori_loop(0, 1,000,000, lambda i, v: v + i) on a float32 scalar; median of 7 runs,
     ms per iteration (fori_scalar_iter);
  2. lax.scan of h = tanh(h @ W + 0.25) for 10,000 steps, h: f32[16, 16], W: f32[16, 16]; median
     of 7 runs, ms per iteration (scan_matmul_iter).
Both results are checked against the same recurrence in NumPy first.
"""
from jax_timing import check, jax, jnp, median_ms, np, report, start

lax = jax.lax


def main():
    args = start(reps=7)
    n = 1_000_000
    looped = jax.jit(lambda x: lax.fori_loop(0, n, lambda i, v: v + i, x))
    x = jnp.float32(0.5)
    want = np.float32(0.5)
    for i in range(n):  # float32 adds, in order, as the loop does them
        want = np.float32(want + np.float32(i))
    check("fori_loop(v + i)", looped(x), want, 0, 0)
    report("fori_scalar_iter", median_ms(lambda: looped(x), args.reps) / n)

    steps, side = 10_000, 16
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((side, side)) * (0.9 / np.sqrt(side))).astype(np.float32)
    h0 = rng.random((side, side), dtype=np.float32)
    scanned = jax.jit(lambda h, w: lax.scan(lambda c, _: (jnp.tanh(c @ w + 0.25), None), h,
                                            length=steps)[0])
    want = h0.astype(np.float64)
    for _ in range(steps):
        want = np.tanh(want @ w + 0.25)
    dh, dw = jnp.asarray(h0), jnp.asarray(w)
    check("scan(tanh(h @ W + 0.25))", scanned(dh, dw), want, 1e-4, 1e-5)
    report("scan_matmul_iter", median_ms(lambda: scanned(dh, dw), args.reps) / steps)


if __name__ == "__main__":
    main()
