"""The random module (cases_random.cpp), bit for bit: key, split, fold_in, bits, uniform, normal,
randint, bernoulli, categorical, permutation (and a few distributions) for several keys and
shapes. Keys are jax.random.PRNGKey's uint32[2] (threefry2x32, JAX's default partitionable
mode), saved as inputs; spmd takes them as its keys. Float draws name float32 (and bernoulli's p
is a float32): with x64, JAX's defaults would draw float64 (from 64-bit words), spmd's float32.
"""
import jax
import jax.numpy as jnp
import numpy as np

def i32(a):
    """Indices as spmd's int32 (x64 makes jnp's default integer int64; the values are equal)."""
    return a.astype(jnp.int32)


SEEDS = {"k0": 0, "k42": 42, "kbig": 2**40 + 12345}
SHAPES = {"s": (), "v": (7,), "m": (3, 4)}


def build(add):
    for sn, seed in SEEDS.items():
        add(f"key_{sn}", lambda: jax.random.PRNGKey(seed))
    for sn, seed in SEEDS.items():
        k = np.asarray(jax.random.PRNGKey(seed))
        add(f"split2_{sn}", lambda a: jax.random.split(a), k)
        add(f"split5_{sn}", lambda a: jax.random.split(a, 5), k)
        add(f"fold_in_{sn}", lambda a: jax.random.fold_in(a, 7), k)
        add(f"fold_in_big_{sn}", lambda a: jax.random.fold_in(a, 2**31 + 5), k)
        add(f"split_fold_{sn}", lambda a: jax.random.fold_in(jax.random.split(a, 3)[2], 1), k)
        for shn, shape in SHAPES.items():
            add(f"bits_{sn}_{shn}", lambda a, shape=shape: jax.random.bits(a, shape, dtype=jnp.uint32), k)
            add(f"uniform_{sn}_{shn}", lambda a, shape=shape: jax.random.uniform(a, shape, dtype=jnp.float32), k)
            add(f"normal_{sn}_{shn}", lambda a, shape=shape: jax.random.normal(a, shape, dtype=jnp.float32), k)
            add(f"randint_{sn}_{shn}",
                lambda a, shape=shape: jax.random.randint(a, shape, -5, 17, dtype=jnp.int32), k)
            add(f"bernoulli_{sn}_{shn}",
                lambda a, shape=shape: jax.random.bernoulli(a, np.float32(0.3), shape), k)
        add(f"bits_odd_{sn}", lambda a: jax.random.bits(a, (5, 3), dtype=jnp.uint32), k)
        add(f"uniform_range_{sn}", lambda a: jax.random.uniform(a, (6,), jnp.float32, -2.0, 3.0),
            k)
        for dt, t in (("f64", jnp.float64), ("f16", jnp.float16), ("bf16", jnp.bfloat16)):
            add(f"uniform_{dt}_{sn}", lambda a, t=t: jax.random.uniform(a, (5,), dtype=t), k)
            add(f"normal_{dt}_{sn}", lambda a, t=t: jax.random.normal(a, (5,), dtype=t), k)
        add(f"normal_c64_{sn}", lambda a: jax.random.normal(a, (4,), dtype=jnp.complex64), k)
        add(f"randint_wide_{sn}", lambda a: jax.random.randint(a, (8,), -2**31, 2**31 - 1,
                                                                dtype=jnp.int32), k)
        add(f"randint_small_{sn}", lambda a: jax.random.randint(a, (8,), 3, 4, dtype=jnp.int32), k)
        add(f"randint_i64_{sn}", lambda a: jax.random.randint(a, (6,), -1000, 10**12,
                                                               dtype=jnp.int64), k)
        add(f"categorical_{sn}", lambda a, l: i32(jax.random.categorical(a, l)), k,
            np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1],
                             [0.25, 0.25, 0.25, 0.25]], np.float32)))
        add(f"categorical_shape_{sn}", lambda a, l: i32(jax.random.categorical(a, l, shape=(5, 2))),
            k, np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.5]], np.float32))
        add(f"categorical_axis0_{sn}", lambda a, l: i32(jax.random.categorical(a, l, axis=0)), k,
            np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.5]], np.float32))
        add(f"permutation_n_{sn}", lambda a: i32(jax.random.permutation(a, 10)), k)
        add(f"permutation_x_{sn}", lambda a, x: jax.random.permutation(a, x, axis=1), k,
            np.arange(12, dtype=np.float32).reshape(3, 4))
        add(f"permutation_ind_{sn}",
            lambda a, x: jax.random.permutation(a, x, axis=0, independent=True), k,
            np.arange(12, dtype=np.int32).reshape(4, 3))
        add(f"gumbel_{sn}", lambda a: jax.random.gumbel(a, (5,), jnp.float32), k)
        add(f"exponential_{sn}", lambda a: jax.random.exponential(a, (5,), jnp.float32), k)
        add(f"truncated_normal_{sn}", lambda a: jax.random.truncated_normal(a, -1.0, 2.0, (5,), jnp.float32),
            k)
        add(f"choice_{sn}", lambda a: i32(jax.random.choice(a, 10, (4,), replace=False)), k)
