"""Reductions and cumulative ops (cases_reductions.cpp): sum, prod, max, min, mean, var,
argmax/argmin (as int32: see i32), any/all, logsumexp over several axes and keepdims; cumsum, cumprod, cummax,
cummin (jnp's and lax's, reverse too).

Integer sums and products are taken with dtype=x.dtype: with x64, jnp.sum of an int32 or
uint32 array promotes to int64/uint64 (JAX's x64 default integer) while spmd keeps the dtype,
as JAX does without x64; the *_default cases show the difference (deviations).
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

def i32(a):
    """jnp.argmax's int64 (x64's default integer) as spmd's int32; argmax_default keeps it."""
    return a.astype(jnp.int32)


AXES = {"all": None, "a0": 0, "a1": 1, "a2": 2, "a02": (0, 2), "am1": -1, "a01": (0, 1)}


def build(add):
    rng = np.random.default_rng(2)
    f = rng.standard_normal((2, 3, 4))
    data = {
        "f32": f.astype(np.float32),
        "f64": f,
        "f16": f.astype(np.float16),
        "bf16": jnp.asarray(f, jnp.bfloat16),
        "i32": rng.integers(-9, 10, (2, 3, 4)).astype(np.int32),
        "i64": rng.integers(-9, 10, (2, 3, 4)).astype(np.int64),
        "u32": rng.integers(0, 10, (2, 3, 4)).astype(np.uint32),
        "c64": (f + 1j * rng.standard_normal((2, 3, 4))).astype(np.complex64),
        "c128": f + 1j * rng.standard_normal((2, 3, 4)),
        "b": rng.random((2, 3, 4)) < 0.5,
    }
    ordered = ["f32", "f64", "f16", "bf16", "i32", "i64", "u32"]
    for dt, x in data.items():
        for an, ax in AXES.items():
            kd = an in ("a1", "a02")
            if dt in ("i32", "u32", "b"):
                add(f"sum_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.sum(
                    v, axis=ax, keepdims=kd, dtype=jnp.int32 if dt == "b" else v.dtype), x)
            else:
                add(f"sum_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.sum(v, axis=ax, keepdims=kd), x)
            if dt != "b":
                p = (lambda v, ax=ax, kd=kd: jnp.prod(v, axis=ax, keepdims=kd, dtype=v.dtype))
                add(f"prod_{dt}_{an}", p, x)
            if dt in ordered or dt == "b":
                add(f"max_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.max(v, axis=ax, keepdims=kd), x)
                add(f"min_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.min(v, axis=ax, keepdims=kd), x)
            if dt not in ("b", "i64", "u32"):
                add(f"mean_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.mean(v, axis=ax, keepdims=kd),
                    x)
                add(f"var_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.var(v, axis=ax, keepdims=kd), x)
            add(f"any_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.any(v, axis=ax, keepdims=kd), x)
            add(f"all_{dt}_{an}", lambda v, ax=ax, kd=kd: jnp.all(v, axis=ax, keepdims=kd), x)
            if dt in ("f32", "f64", "f16", "bf16"):
                add(f"logsumexp_{dt}_{an}",
                    lambda v, ax=ax, kd=kd: jax.nn.logsumexp(v, axis=ax, keepdims=kd), x)
        if dt in ordered or dt == "b":
            for an, ax in (("all", None), ("a0", 0), ("a1", 1), ("am1", -1)):
                add(f"argmax_{dt}_{an}", lambda v, ax=ax: i32(jnp.argmax(v, axis=ax)), x)
                add(f"argmin_{dt}_{an}", lambda v, ax=ax: i32(jnp.argmin(v, axis=ax)), x)
            add(f"argmax_{dt}_keep", lambda v: i32(jnp.argmax(v, axis=1, keepdims=True)), x)
    # The x64 default integer of jnp.sum / prod (deviations: spmd keeps int32 as JAX without x64).
    add("sum_i32_default", lambda v: jnp.sum(v, axis=0), data["i32"])
    add("sum_b_default", lambda v: jnp.sum(v, axis=0), data["b"])
    add("cumsum_b_default", lambda v: jnp.cumsum(v, axis=0), data["b"])

    # Special values: NaN propagates through max/min/sum; argmax of NaN finds the first NaN;
    # ties give the first index; -inf rows of logsumexp; -0.0 and 0.0.
    s = np.array([[1.0, np.nan, 3.0, 3.0], [-np.inf, -np.inf, -np.inf, -np.inf],
                  [2.0, 5.0, 5.0, -1.0], [0.0, -0.0, np.inf, 1.0]])
    for dt, t in (("f32", np.float32), ("f64", np.float64)):
        v = s.astype(t)
        add(f"max_special_{dt}", lambda a: jnp.max(a, axis=1), v)
        add(f"min_special_{dt}", lambda a: jnp.min(a, axis=1), v)
        add(f"sum_special_{dt}", lambda a: jnp.sum(a, axis=1), v)
        add(f"argmax_special_{dt}", lambda a: i32(jnp.argmax(a, axis=1)), v)
        add(f"argmin_special_{dt}", lambda a: i32(jnp.argmin(a, axis=1)), v)
        add(f"logsumexp_special_{dt}", lambda a: jax.nn.logsumexp(a, axis=1), v)
        add(f"mean_special_{dt}", lambda a: jnp.mean(a, axis=0), v)
    ties = np.array([[3, 1, 3, 0], [2, 2, 2, 2], [-5, 7, 7, -5]], np.int32)
    add("argmax_ties_i32", lambda a: i32(jnp.argmax(a, axis=1)), ties)
    add("argmin_ties_i32", lambda a: i32(jnp.argmin(a, axis=1)), ties)
    add("argmax_default", lambda a: jnp.argmax(a, axis=1), ties)
    add("max_big_f32", lambda a: jnp.sum(a), np.array([3e38, 3e38, -1e38], np.float32))
    # A long sum: spmd and XLA add in different orders (pairwise/vectorised), hence a tolerance.
    long = rng.standard_normal(1000).astype(np.float32)
    add("sum_long_f32", lambda a: jnp.sum(a), long)
    add("mean_long_f32", lambda a: jnp.mean(a), long)
    add("var_long_f32", lambda a: jnp.var(a), long)
    add("sum_long_f16", lambda a: jnp.sum(a), long.astype(np.float16))
    add("sum_long_bf16", lambda a: jnp.sum(a), jnp.asarray(long, jnp.bfloat16))
    # Empty axes: sum 0, prod 1, logsumexp -inf, any False, all True.
    e = np.zeros((3, 0), np.float32)
    add("sum_empty_f32", lambda a: jnp.sum(a, axis=1), e)
    add("prod_empty_f32", lambda a: jnp.prod(a, axis=1), e)
    add("any_empty_f32", lambda a: jnp.any(a, axis=1), e)
    add("all_empty_f32", lambda a: jnp.all(a, axis=1), e)
    add("logsumexp_empty_f32", lambda a: jax.nn.logsumexp(a, axis=1), e)
    add("sum_noaxes_f32", lambda a: jnp.sum(a, axis=()), data["f32"])

    # Cumulative ops
    cum = {"f32": data["f32"], "f64": data["f64"], "i32": data["i32"], "f16": data["f16"],
           "bf16": data["bf16"], "c64": data["c64"], "u32": data["u32"], "i64": data["i64"]}
    for dt, x in cum.items():
        for an, ax in (("a0", 0), ("a1", 1), ("am1", -1)):
            if dt in ("i32", "u32"):
                add(f"cumsum_{dt}_{an}", lambda v, ax=ax: jnp.cumsum(v, axis=ax, dtype=v.dtype), x)
                add(f"cumprod_{dt}_{an}",
                    lambda v, ax=ax: jnp.cumprod(v, axis=ax, dtype=v.dtype), x)
            else:
                add(f"cumsum_{dt}_{an}", lambda v, ax=ax: jnp.cumsum(v, axis=ax), x)
                add(f"cumprod_{dt}_{an}", lambda v, ax=ax: jnp.cumprod(v, axis=ax), x)
            if dt != "c64":
                add(f"cummax_{dt}_{an}", lambda v, ax=ax: lax.cummax(v, axis=ax % 3), x)
                add(f"cummin_{dt}_{an}", lambda v, ax=ax: lax.cummin(v, axis=ax % 3), x)
        if dt in ("i32", "u32"):
            add(f"cumsum_{dt}_flat", lambda v: jnp.cumsum(v, dtype=v.dtype), x)
        else:
            add(f"cumsum_{dt}_flat", lambda v: jnp.cumsum(v), x)
        add(f"lax_cumsum_{dt}_rev", lambda v: lax.cumsum(v, axis=1, reverse=True), x)
        add(f"lax_cumprod_{dt}_rev", lambda v: lax.cumprod(v, axis=2, reverse=True), x)
        if dt != "c64":
            add(f"lax_cummax_{dt}_rev", lambda v: lax.cummax(v, axis=2, reverse=True), x)
            add(f"lax_cummin_{dt}_rev", lambda v: lax.cummin(v, axis=0, reverse=True), x)
    add("cumsum_b", lambda v: jnp.cumsum(v, axis=1, dtype=jnp.int32), data["b"])
    add("cummax_special_f32", lambda v: lax.cummax(v, axis=1), s.astype(np.float32))
    add("cumsum_special_f64", lambda v: jnp.cumsum(v, axis=1), s)

    # Softmax family (jax.nn) over an axis, with -inf entries and large values.
    sm = np.array([[1.0, 2.0, 3.0, -np.inf], [1000.0, 1000.0, -1000.0, 0.0],
                   [-np.inf, 0.5, -0.5, 2.0]])
    for dt, t in (("f32", np.float32), ("f64", np.float64), ("bf16", jnp.bfloat16)):
        v = jnp.asarray(sm, t) if dt == "bf16" else sm.astype(t)
        add(f"softmax_{dt}", lambda a: jax.nn.softmax(a, axis=-1), v)
        add(f"log_softmax_{dt}", lambda a: jax.nn.log_softmax(a, axis=-1), v)
        add(f"softmax_axis0_{dt}", lambda a: jax.nn.softmax(a, axis=0), v)
    add("standardize_f32", lambda a: jax.nn.standardize(a, axis=-1), data["f32"])
    add("standardize_f64", lambda a: jax.nn.standardize(a, axis=1), data["f64"])
