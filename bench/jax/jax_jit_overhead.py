"""JAX counterpart of bench_jit_overhead: the per-call cost of a cached jax.jit call of
f(x) = x * 2 + 1 on f32[3], each call waited for (block_until_ready); median of 3 rounds of 15
batches x 20,000 calls. Prints jit_dispatch_ms (per call)."""
from jax_timing import check, dispatch_ms, jax, jnp, np, report, start


def main():
    args = start(calls=20000)
    f = jax.jit(lambda x: x * 2 + 1)
    x = jnp.asarray(np.array([1.5, -2.0, 4.0], np.float32))
    check("jit(x * 2 + 1)", f(x), [4.0, -3.0, 9.0], 0, 0)
    report("jit_dispatch", dispatch_ms(lambda: f(x), 15, args.calls, 3))


if __name__ == "__main__":
    main()
