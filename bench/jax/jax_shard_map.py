"""JAX counterpart of bench_shard_map:
  1. dispatch: a cached jax.jit(jax.shard_map(x + 1)) on f32[8], P("i") over a 1-D mesh of 8
     devices, the input placed once, each call waited for; median of 7 rounds of 5 batches x
     2,000 calls (shard_map_dispatch);
  2. examples/mesh_mlp.cpp's training step: data + tensor parallel MLP (32-128-10, batch 64,
     plain SGD lr 0.2) on a 2 x 4 ("data", "model") mesh, W1 column-parallel and W2 row-parallel
     over "model", the batch over "data"; written as the example writes it, with shard_map's
     default check_vma=True (the gradients come back summed over "data", as in spmd's shard_map);
     each run takes 20 steps, median ms/step of 7 runs after a warm-up run (mesh_mlp_step). The
     first step is checked against the same step on one device (its loss against NumPy).
"""
from jax_timing import check, dispatch_ms, jax, jnp, median_ms, np, report, start

P = jax.sharding.PartitionSpec
lax = jax.lax


def cross_entropy(logits, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))


def mesh_step(data_size, lr):
    def body(w1, b1, w2, b2, x, y):
        def local_loss(w1, b1, w2, b2):
            h = jax.nn.relu(x @ w1 + b1)                  # column-parallel
            logits = lax.psum(h @ w2, "model") + b2       # row-parallel, summed over "model"
            return cross_entropy(logits, y) / data_size   # this block's share of the mean
        loss, (g1, gb1, g2, gb2) = jax.value_and_grad(local_loss, (0, 1, 2, 3))(w1, b1, w2, b2)
        return w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2, lax.psum(loss, "data")
    return body


def bench_mesh_mlp(reps, steps, batch=64, d_in=32, hidden=128, classes=10, lr=0.2):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    specs = (P(None, "model"), P("model"), P("model", None), P())
    step = jax.jit(jax.shard_map(mesh_step(2.0, lr), mesh=mesh,
                                 in_specs=specs + (P("data", None), P("data")),
                                 out_specs=specs + (P(),)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, d_in), dtype=np.float32)
    y = np.argmax(x @ rng.standard_normal((d_in, classes), dtype=np.float32), 1).astype(np.int32)
    params = (rng.standard_normal((d_in, hidden), dtype=np.float32) / np.sqrt(d_in),
              np.zeros(hidden, np.float32),
              rng.standard_normal((hidden, classes), dtype=np.float32) / np.sqrt(hidden),
              np.zeros(classes, np.float32))
    place = lambda a, spec: jax.device_put(a, jax.sharding.NamedSharding(mesh, spec))  # noqa: E731
    p0 = tuple(place(a, s) for a, s in zip(params, specs))
    xd, yd = place(x, P("data", None)), place(y, P("data"))

    def one_device(w1, b1, w2, b2):
        loss_fn = lambda *p: cross_entropy(jax.nn.relu(x @ p[0] + p[1]) @ p[2] + p[3], y)  # noqa
        loss, g = jax.value_and_grad(loss_fn, (0, 1, 2, 3))(w1, b1, w2, b2)
        return tuple(p - lr * d for p, d in zip((w1, b1, w2, b2), g)) + (loss,)
    out, ref = step(*p0, xd, yd), jax.jit(one_device)(*params)
    for got, want in zip(out, ref):
        check("mesh MLP step vs one device", got, want, 1e-4, 1e-5)
    h = np.maximum(x.astype(np.float64) @ params[0] + params[1], 0) @ params[2] + params[3]
    logp = h - h.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    check("mesh MLP loss vs NumPy", out[4], -logp[np.arange(batch), y].mean(), 1e-5)

    state = {"p": p0}

    def run():
        p = state["p"]
        for _ in range(steps):
            p = step(*p, xd, yd)[:4]
        state["p"] = p
        return p
    report("mesh_mlp_step", median_ms(run, reps, per=steps))


def main():
    args = start(reps=7, steps=20)
    mesh = jax.make_mesh((8,), ("i",))
    sm = jax.jit(jax.shard_map(lambda v: v + 1.0, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    x8 = jax.device_put(np.zeros(8, np.float32), jax.sharding.NamedSharding(mesh, P("i")))
    check("shard_map(x + 1)", sm(x8), np.ones(8), 0, 0)
    report("shard_map_dispatch", dispatch_ms(lambda: sm(x8), 5, 2000, 7))
    bench_mesh_mlp(args.reps, args.steps)


if __name__ == "__main__":
    main()
