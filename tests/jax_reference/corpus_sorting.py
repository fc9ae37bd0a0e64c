"""Sorting and searching (cases_sorting.cpp): jnp.sort / argsort (stable, descending, NaNs last,
several axes and dtypes), lax.sort of several operands over num_keys keys, lax.top_k (ties in
index order, NaN largest), searchsorted, unique with a static size.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax


def i32(a):
    """jnp.argsort's int64 (x64's default integer) as spmd's int32."""
    return a.astype(jnp.int32)


def build(add):
    rng = np.random.default_rng(4)
    f = np.round(rng.standard_normal((3, 7)) * 3) / 2  # many ties
    f[0, 2] = np.nan
    f[1, 3] = np.inf
    f[1, 5] = -np.inf
    f[2, 0] = -0.0  # (0.0 and -0.0 in one row: the signed_zeros cases below)
    f[2, 4] = 1.25
    data = {
        "f32": f.astype(np.float32),
        "f64": f,
        "f16": f.astype(np.float16),
        "bf16": jnp.asarray(f, jnp.bfloat16),
        "i32": rng.integers(-4, 5, (3, 7)).astype(np.int32),
        "i64": rng.integers(-4, 5, (3, 7)).astype(np.int64),
        "u32": rng.integers(0, 6, (3, 7)).astype(np.uint32),
        "b": rng.random((3, 7)) < 0.5,
    }
    for dt, x in data.items():
        add(f"sort_{dt}", lambda a: jnp.sort(a), x)
        add(f"sort_axis0_{dt}", lambda a: jnp.sort(a, axis=0), x)
        add(f"sort_flat_{dt}", lambda a: jnp.sort(a, axis=None), x)
        add(f"sort_desc_{dt}", lambda a: jnp.sort(a, descending=True), x)
        add(f"argsort_{dt}", lambda a: i32(jnp.argsort(a, stable=True)), x)
        add(f"argsort_axis0_{dt}", lambda a: i32(jnp.argsort(a, axis=0, stable=True)), x)
        add(f"argsort_desc_{dt}", lambda a: i32(jnp.argsort(a, descending=True, stable=True)), x)
        add(f"lax_argsort_{dt}", lambda a: lax.sort_key_val(
            a, lax.broadcasted_iota(jnp.int32, a.shape, 1), dimension=1)[1], x)
        if dt != "b":
            add(f"top_k_{dt}", lambda a: lax.top_k(a, 4), x)
    add("argsort_default", lambda a: jnp.argsort(a), data["i32"])
    # lax.sort of several operands: keys (then values) permuted alike.
    k1 = np.array([3, 1, 3, 2, 1, 3, 2, 1], np.int32)
    k2 = np.array([0.5, 2.0, -1.0, 0.5, 2.0, 0.5, np.nan, -3.0], np.float32)
    v = np.arange(8, dtype=np.float64) * 1.5
    add("lax_sort_1key", lambda a, b, c: lax.sort((a, b, c), num_keys=1), k1, k2, v)
    add("lax_sort_2keys", lambda a, b, c: lax.sort((a, b, c), num_keys=2), k1, k2, v)
    add("lax_sort_2d_dim0", lambda a, b: lax.sort((a, b), dimension=0, num_keys=1),
        data["i32"], data["f32"])
    add("top_k_k1_f64", lambda a: lax.top_k(a, 1), data["f64"])
    add("top_k_all_i32", lambda a: lax.top_k(a, 7), data["i32"])
    add("top_k_3d_f32", lambda a: lax.top_k(a, 2),
        rng.standard_normal((2, 3, 5)).astype(np.float32))
    # searchsorted, unique
    s = np.array([-2.0, -1.0, -1.0, 0.0, 0.5, 3.0, 3.0, 3.0, 7.0], np.float32)
    q = np.array([[-3.0, -1.0, 0.25, 3.0], [7.0, 8.0, 0.5, np.nan]], np.float32)
    add("searchsorted_left_f32", lambda a, b: jnp.searchsorted(a, b, side="left"), s, q)
    add("searchsorted_right_f32", lambda a, b: jnp.searchsorted(a, b, side="right"), s, q)
    si = np.array([0, 2, 2, 4, 9], np.int32)
    add("searchsorted_left_i32", lambda a, b: jnp.searchsorted(a, b), si,
        np.array([-1, 0, 2, 3, 9, 10], np.int32))
    u = np.array([3, 1, 3, -2, 7, 1, 1, 0], np.int32)
    add("unique_pad_i32", lambda a: jnp.unique(a, size=8), u)
    add("unique_cut_i32", lambda a: jnp.unique(a, size=3), u)
    add("unique_fill_f32", lambda a: jnp.unique(a, size=7, fill_value=-9.0),
        np.array([2.5, -1.0, 2.5, 0.0, 4.0], np.float32))
    z = np.array([0.0, -0.0, 1.0, -0.0, 0.0, np.nan, -np.nan, -1.0], np.float32)
    add("sort_zeros_f32", lambda a: jnp.sort(a), z)
    add("argsort_zeros_f32", lambda a: i32(jnp.argsort(a, stable=True)), z)
    # -0.0 before 0.0 in one row: XLA's TopK orders -0.0 below 0.0, and jnp.sort(descending=True)
    # is the reversed ascending sort, so 0.0 comes first; spmd keeps equal elements in index order.
    zz = np.array([[-0.0, 2.0, 0.0, -1.0, 0.0, -0.0]], np.float32)
    add("sort_desc_signed_zeros_f32", lambda a: jnp.sort(a, descending=True), zz)
    add("top_k_signed_zeros_f32", lambda a: lax.top_k(a, 5), zz)
