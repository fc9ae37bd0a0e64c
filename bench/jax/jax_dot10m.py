"""JAX counterpart of bench_dot10m: 10,000,000 row-wise dot products of 3-D float32 vectors,
jax.jit(jax.vmap(jnp.dot)) on (10M, 3) inputs placed on the device once; median of 11 runs after
two warm-up calls. Prints dot10m_jit_ms."""
from jax_timing import check, jax, jnp, median_ms, np, report, start


def main():
    args = start(n=10_000_000, reps=11)
    rng = np.random.default_rng(0)
    a = rng.random((args.n, 3), dtype=np.float32)
    b = rng.random((args.n, 3), dtype=np.float32)
    f = jax.jit(jax.vmap(jnp.dot))
    da, db = jnp.asarray(a), jnp.asarray(b)
    check("jit(vmap(dot))", f(da, db), np.einsum("ij,ij->i", a.astype(np.float64), b))
    report("dot10m_jit", median_ms(lambda: f(da, db), args.reps, warmup=2))


if __name__ == "__main__":
    main()
