"""JAX counterpart of bench_pmap:
  1. 10,000,000 row-wise dot products of 3-D float32 vectors, jax.pmap(jax.vmap(jnp.dot)) over
     8 devices, inputs (8, 1.25M, 3) placed on the devices once; median of 11 runs after two
     warm-up calls (dot10m_pmap8);
  2. the per-call cost of a cached jax.pmap(lambda x: x + 1) on f32[8] over 8 devices, each call
     waited for; median of 3 rounds of 15 batches x 2,000 calls (pmap_dispatch).
"""
from jax_timing import check, dispatch_ms, jax, jnp, median_ms, np, report, shard_rows, start


def main():
    args = start(n=10_000_000, reps=11)
    devices = 8
    rng = np.random.default_rng(0)
    a = rng.random((args.n, 3), dtype=np.float32)
    b = rng.random((args.n, 3), dtype=np.float32)
    pmapped = jax.pmap(jax.vmap(jnp.dot))
    a8, b8 = (shard_rows(v.reshape(devices, args.n // devices, 3)) for v in (a, b))
    ref = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    check("pmap(vmap(dot))", np.asarray(pmapped(a8, b8)).reshape(-1), ref)
    report("dot10m_pmap8", median_ms(lambda: pmapped(a8, b8), args.reps, warmup=2))

    x = shard_rows(0.5 * np.arange(devices, dtype=np.float32) - 1.0)
    inc = jax.pmap(lambda v: v + 1)
    check("pmap(x + 1)", inc(x), np.asarray(x) + 1, 0, 0)
    report("pmap_dispatch", dispatch_ms(lambda: inc(x), 15, 2000, 3))


if __name__ == "__main__":
    main()
