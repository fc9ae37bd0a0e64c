"""Indexing (cases_indexing.cpp): gathers (jnp.take and take_along_axis in their modes, x[idx],
lax.gather's clamped rows along an axis with batch dimensions) and scatters (x.at[idx] set, add,
subtract, multiply, min, max with duplicates, negative and out-of-bound indices; lax scatters
along an axis with batch dims), dynamic_slice / dynamic_update_slice (clamped starts).
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "u32": np.uint32,
      "b": np.bool_, "bf16": jnp.bfloat16, "f16": np.float16, "c64": np.complex64}


def arr(v, dt):
    if dt == "b":
        return np.asarray(v) % 3 == 0
    if dt == "c64":
        return (np.asarray(v) + 0.5j * np.asarray(v)[::-1]).astype(np.complex64)
    return jnp.asarray(v, DT[dt]) if dt == "bf16" else np.asarray(v).astype(DT[dt])


def build(add):
    base = np.arange(15).reshape(5, 3) * 3 - 7
    idx = np.array([0, 4, -1, -5, 5, -6, 2, 2], np.int32)
    for dt in DT:
        x = arr(base if dt != "u32" else np.abs(base), dt)
        add(f"take_fill_{dt}", lambda a, i: jnp.take(a, i, axis=0, mode="fill"), x, idx)
        add(f"take_clip_{dt}", lambda a, i: jnp.take(a, i, axis=0, mode="clip"), x, idx)
        add(f"take_wrap_{dt}", lambda a, i: jnp.take(a, i, axis=0, mode="wrap"), x, idx)
        add(f"take_axis1_{dt}", lambda a, i: jnp.take(a, i, axis=1, mode="fill"), x,
            np.array([[0, 2], [-1, 3]], np.int32))
        add(f"take_flat_{dt}", lambda a, i: jnp.take(a, i, mode="fill"), x,
            np.array([0, 14, 15, -1, -16, 7], np.int32))
        add(f"getitem_{dt}", lambda a, i: jnp.asarray(a)[i], x,
            np.array([[1, -2], [4, 0]], np.int32))
        add(f"at_get_{dt}", lambda a, i: jnp.asarray(a).at[i].get(), x, idx)
        ti = np.array([[0, 2, -1], [3, 1, 0], [5, -4, 2], [1, 1, 1], [-3, 0, 9]], np.int32)
        add(f"take_along_fill_{dt}", lambda a, i: jnp.take_along_axis(a, i, axis=1, mode="fill"),
            x, ti)
        add(f"take_along_clip_{dt}", lambda a, i: jnp.take_along_axis(a, i, axis=1, mode="clip"),
            x, ti)
        # lax gathers: rows along an axis, indices clamped into range (spmd's lax::gather).
        gi = np.array([3, -1, 7, 0], np.int32)
        add(f"gather_axis0_{dt}", lambda a, i: jnp.asarray(a)[jnp.clip(i, 0, 4)], x, gi)
        add(f"gather_axis1_{dt}", lambda a, i: jnp.asarray(a)[:, jnp.clip(i, 0, 2)], x, gi)
        bi = np.array([[0, 2], [1, 1], [2, 0], [5, -1], [1, 0]], np.int32)
        add(f"gather_batch_{dt}",
            lambda a, i: jnp.asarray(a)[np.arange(5)[:, None], jnp.clip(i, 0, 2)], x, bi)

    take_fill = np.array([0, 14, 15, -1, -16], np.int32)
    add("take_fill_value_f32", lambda a, i: jnp.take(a, i, mode="fill", fill_value=7.5),
        np.arange(15, dtype=np.float32), take_fill)
    add("take_fill_value_i32", lambda a, i: jnp.take(a, i, mode="fill", fill_value=-3),
        np.arange(15, dtype=np.int32), take_fill)
    add("take_u32_index_f32", lambda a, i: jnp.take(a, i, axis=0, mode="fill"),
        np.arange(5, dtype=np.float32), np.array([0, 4, 5, 4294967295], np.uint32))
    add("take_along_promise_f32",
        lambda a, i: jnp.take_along_axis(a, i, axis=0, mode="promise_in_bounds"),
        np.arange(12, dtype=np.float32).reshape(4, 3), np.array([[3, 0, 1], [2, 2, 0]], np.int32))
    add("take_along_axis0_f64", lambda a, i: jnp.take_along_axis(a, i, axis=0),
        np.arange(12, dtype=np.float64).reshape(4, 3), np.array([[3, 0, 1], [-1, 2, 7]], np.int32))
    add("take_along_bcast_f32", lambda a, i: jnp.take_along_axis(a, i, axis=1),
        np.arange(12, dtype=np.float32).reshape(4, 3), np.array([[2, 0, 1, 1]], np.int32))
    add("take_along_flat_i32", lambda a, i: jnp.take_along_axis(a, i, axis=None),
        np.arange(12, dtype=np.int32).reshape(4, 3), np.array([11, 0, -1, 5], np.int32))
    add("take_3d_axis1_f32", lambda a, i: jnp.take(a, i, axis=1, mode="clip"),
        np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([[2, 0], [1, 9]], np.int32))

    # x.at[idx] updates: duplicates combine in order, negatives count from the end, indices
    # still out of bounds are dropped (JAX's default mode for .at updates).
    ui = np.array([1, 3, 1, -1, 7, -7, 0], np.int32)
    upd_base = np.arange(21).reshape(7, 3) - 9
    for dt in ("f32", "f64", "i32", "i64", "u32", "bf16", "f16", "c64", "b"):
        x = arr(base if dt != "u32" else np.abs(base), dt)
        u = arr(upd_base if dt != "u32" else np.abs(upd_base), dt)
        add(f"at_set_{dt}", lambda a, i, v: jnp.asarray(a).at[i].set(v), x, ui, u)
        if dt == "b":
            continue
        add(f"at_add_{dt}", lambda a, i, v: jnp.asarray(a).at[i].add(v), x, ui, u)
        add(f"at_multiply_{dt}", lambda a, i, v: jnp.asarray(a).at[i].multiply(v), x, ui, u)
        if dt != "u32":
            add(f"at_subtract_{dt}", lambda a, i, v: jnp.asarray(a).at[i].subtract(v), x, ui, u)
        if dt != "c64":
            add(f"at_min_{dt}", lambda a, i, v: jnp.asarray(a).at[i].min(v), x, ui, u)
            add(f"at_max_{dt}", lambda a, i, v: jnp.asarray(a).at[i].max(v), x, ui, u)
    # A scalar index and a broadcast update.
    add("at_set_scalar_f32", lambda a, i, v: jnp.asarray(a).at[i].set(v),
        arr(base, "f32"), np.array(-2, np.int32), np.array([1.0, 2.0, 3.0], np.float32))
    add("at_add_bcast_f32", lambda a, i, v: jnp.asarray(a).at[i].add(v),
        arr(base, "f32"), np.array([[0, 1], [1, 4]], np.int32), np.array(0.5, np.float32))

    # lax scatters along an axis with gather's layout; indices outside [0, n) are dropped
    # (negative ones too: lax does not count from the end), written here as .at with mode
    # "drop" after sending negative indices out of range.
    def drop_neg(i, n):
        return jnp.where(i < 0, n, i)

    si = np.array([2, 0, 2, -1, 3, 9], np.int32)
    su = (np.arange(18).reshape(3, 6).T - 4)
    ops = {"set": "set", "add": "add", "mul": "multiply", "min": "min", "max": "max"}
    for dt in ("f32", "f64", "i32", "bf16", "c64"):
        x = arr(np.arange(12).reshape(4, 3) - 5, dt)
        u = arr(su, dt)  # (6, 3): rows for axis 0
        ut = arr(su.T.copy(), dt)  # (3, 6)? axis-1 updates need (4, 6)
        u1 = arr(np.arange(24).reshape(4, 6) - 11, dt)
        for name, m in ops.items():
            if dt == "c64" and name in ("min", "max"):
                continue
            add(f"scatter_{name}_axis0_{dt}",
                lambda a, i, v, m=m: getattr(jnp.asarray(a).at[drop_neg(i, 4)], m)(v, mode="drop"),
                x, si, u)
            add(f"scatter_{name}_axis1_{dt}",
                lambda a, i, v, m=m: getattr(jnp.asarray(a).at[:, drop_neg(i, 3)], m)(
                    v, mode="drop"), x, si, u1)
        del ut
        bi = np.array([[0, 2, 2], [1, -1, 0], [3, 1, 1], [2, 2, 0]], np.int32)
        bu = arr(np.arange(12).reshape(4, 3) + 1, dt)
        for name, m in (("set", "set"), ("add", "add")):
            add(f"scatter_{name}_batch_{dt}",
                lambda a, i, v, m=m: getattr(
                    jnp.asarray(a).at[np.arange(4)[:, None], drop_neg(i, 3)], m)(v, mode="drop"),
                x, bi, bu)

    # dynamic_slice / dynamic_update_slice: starts clamped so the block stays inside.
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    for k, (s0, s1) in enumerate(((1, 2), (4, 5), (-1, 0), (3, -7), (0, 0))):
        a0, a1 = np.array(s0, np.int32), np.array(s1, np.int32)
        add(f"dynamic_slice_{k}", lambda v, i, j: lax.dynamic_slice(v, (i, j), (2, 3)), x, a0, a1)
        add(f"dynamic_update_slice_{k}",
            lambda v, u, i, j: lax.dynamic_update_slice(v, u, (i, j)), x,
            -np.arange(6, dtype=np.float32).reshape(2, 3) - 1, a0, a1)
    add("dynamic_slice_in_dim_i32", lambda v, i: lax.dynamic_slice_in_dim(v, i, 3, axis=1),
        np.arange(30, dtype=np.int32).reshape(5, 6), np.array(4, np.int32))
    add("dynamic_update_slice_in_dim_bf16",
        lambda v, u, i: lax.dynamic_update_slice_in_dim(v, u, i, axis=0),
        jnp.asarray(np.arange(30).reshape(5, 6), jnp.bfloat16),
        jnp.ones((2, 6), jnp.bfloat16), np.array(-2, np.int32))
    add("dynamic_slice_i64_start_c64", lambda v, i: lax.dynamic_slice(v, (i,), (2,)),
        np.arange(5).astype(np.complex64), np.array(3, np.int64))
    # one_hot (gather-like in jnp), searchsorted
    add("one_hot_f32", lambda i: jnp.asarray(jax_one_hot(i, 4)),  # float32: x64 defaults to f64
        np.array([0, 3, 1, -1, 4, 2], np.int32))


def jax_one_hot(i, n):
    import jax
    return jax.nn.one_hot(i, n, dtype=jnp.float32)
