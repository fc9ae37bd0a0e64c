"""JAX counterpart of bench_latency (one process): a jax.pmap whose body is one lax.psum of
f32[4] per device, on 2 and on 8 devices, inputs placed on the devices once, each call waited
for; median of 9 rounds of 2,000 calls. Prints psum4_2dev_ms and psum4_8dev_ms (per call)."""
from jax_timing import check, dispatch_ms, jax, np, report, shard_rows, start


def main():
    start()
    for devices in (2, 8):
        x = shard_rows(np.arange(devices * 4, dtype=np.float32).reshape(devices, 4))
        p = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")
        want = np.broadcast_to(np.asarray(x).sum(0), (devices, 4))
        check(f"pmap(psum) on {devices} devices", p(x), want, 0, 0)
        report(f"psum4_{devices}dev", dispatch_ms(lambda: p(x), 1, 2000, 9))


if __name__ == "__main__":
    main()
