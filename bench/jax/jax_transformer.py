"""JAX counterpart of bench_sharded_jit's transformer step (examples/transformer_model.h): a
GPT-style byte-level decoder (2 blocks, width 64, 4 heads, sequence 64, batch 16, vocabulary
256; causal multi-head attention and a GELU MLP behind layer norms, a tied output layer), one
AdamW step (lr 1e-2, b1 0.9, b2 0.95, eps 1e-8, weight decay 0.01) under jax.jit with the same
shardings on a 2 x 4 ("data", "model") mesh of 8 emulated CPU devices: the batch over "data",
Megatron over "model" (the columns of Wq, Wk, Wv and W1 and b1, the rows of Wo and W2), the
rest replicated; the parameters and AdamW's moments laid out once and kept by out_shardings.
Each run takes 20 steps; median ms/step of 7 runs after a warm-up run (transformer_step). The
partitioned step's first loss is checked against the same step jitted on one device.
"""
from jax_timing import check, jax, jnp, median_ms, np, report, start

P = jax.sharding.PartitionSpec
NS = jax.sharding.NamedSharding


def init(key, layers, width, seq, vocab=256):
    keys = iter(jax.random.split(key, 4 + 8 * layers))
    normal = lambda shape, scale: jax.random.normal(next(keys), shape, jnp.float32) * scale
    proj = 0.02 / np.sqrt(2.0 * layers)
    d = width
    blocks = [dict(ln1_g=jnp.ones(d), ln1_b=jnp.zeros(d), wq=normal((d, d), 0.02),
                   wk=normal((d, d), 0.02), wv=normal((d, d), 0.02), wo=normal((d, d), proj),
                   ln2_g=jnp.ones(d), ln2_b=jnp.zeros(d), w1=normal((d, 4 * d), 0.02),
                   b1=jnp.zeros(4 * d), w2=normal((4 * d, d), proj), b2=jnp.zeros(d))
              for _ in range(layers)]
    return dict(wte=normal((vocab, d), 0.02), wpe=normal((seq, d), 0.01), blocks=blocks,
                lnf_g=jnp.ones(d), lnf_b=jnp.zeros(d))


def specs(params):
    megatron = dict(wq=P(None, "model"), wk=P(None, "model"), wv=P(None, "model"),
                    wo=P("model"), w1=P(None, "model"), b1=P("model"), w2=P("model"))
    out = jax.tree_util.tree_map(lambda _: P(), params)
    out["blocks"] = [{k: megatron.get(k, P()) for k in b} for b in params["blocks"]]
    return out


def layer_norm(x, g, b, eps=1e-5):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * g + b


def forward(p, ids, heads):
    b, t = ids.shape
    d = p["wte"].shape[1]
    x = p["wte"][ids] + p["wpe"][:t]
    for blk in p["blocks"]:
        h = layer_norm(x, blk["ln1_g"], blk["ln1_b"])
        split = lambda w: (h @ w).reshape(b, t, heads, d // heads)
        a = jax.nn.dot_product_attention(split(blk["wq"]), split(blk["wk"]), split(blk["wv"]),
                                         is_causal=True)
        x = x + a.reshape(b, t, d) @ blk["wo"]
        u = layer_norm(x, blk["ln2_g"], blk["ln2_b"])
        x = x + jax.nn.gelu(u @ blk["w1"] + blk["b1"]) @ blk["w2"] + blk["b2"]
    x = layer_norm(x, p["lnf_g"], p["lnf_b"])
    return x @ p["wte"].T


def loss_fn(p, ids, targets, heads):
    logits = forward(p, ids, heads).reshape(-1, 256)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, targets.reshape(-1, 1), 1))


def adamw_step(heads, lr=1e-2, b1=0.9, b2=0.95, eps=1e-8, wd=0.01):
    def step(p, mu, nu, count, ids, targets):
        loss, g = jax.value_and_grad(loss_fn)(p, ids, targets, heads)
        count = count + 1
        mu = jax.tree_util.tree_map(lambda m, gi: b1 * m + (1 - b1) * gi, mu, g)
        nu = jax.tree_util.tree_map(lambda v, gi: b2 * v + (1 - b2) * gi * gi, nu, g)
        c1, c2 = 1 - b1 ** count, 1 - b2 ** count
        p = jax.tree_util.tree_map(
            lambda x, m, v: x - lr * ((m / c1) / (jnp.sqrt(v / c2) + eps) + wd * x), p, mu, nu)
        return p, mu, nu, count, loss
    return step


def main():
    a = start(reps=7, steps=20, layers=2, width=64, heads=4, seq=64, batch=16)
    # Auto axes: XLA's sharding propagation partitions the step (JAX's Explicit default asks
    # for out_sharding on the embedding's gather).
    auto = jax.sharding.AxisType.Auto
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(auto, auto))
    params = init(jax.random.key(0), a.layers, a.width, a.seq)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 256, (a.batch, a.seq), dtype=np.int32)
    targets = rng.integers(0, 256, (a.batch, a.seq), dtype=np.int32)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    step = adamw_step(a.heads)

    # The first loss, partitioned against one device.
    one = jax.jit(step)(params, zeros, zeros, jnp.float32(0), ids, targets)[-1]

    s = jax.tree_util.tree_map(lambda sp: NS(mesh, sp), specs(params),
                               is_leaf=lambda x: isinstance(x, P))
    scalar, batch = NS(mesh, P()), NS(mesh, P("data"))
    sharded = jax.jit(step, in_shardings=(s, s, s, scalar, batch, batch),
                      out_shardings=(s, s, s, scalar, scalar), donate_argnums=(0, 1, 2))
    state = [jax.device_put(params, s), jax.device_put(zeros, s),
             jax.device_put(jax.tree_util.tree_map(jnp.zeros_like, params), s),
             jax.device_put(jnp.float32(0), scalar)]
    ids_d, targets_d = jax.device_put(ids, batch), jax.device_put(targets, batch)
    state = list(sharded(*state, ids_d, targets_d))
    check("the partitioned step's loss", state[-1], one, rtol=1e-5)
    state = state[:-1]

    def run():
        nonlocal state
        loss = None
        for _ in range(a.steps):
            *state, loss = sharded(*state, ids_d, targets_d)
        return loss

    report("transformer_step", median_ms(run, a.reps, per=a.steps))


if __name__ == "__main__":
    main()
