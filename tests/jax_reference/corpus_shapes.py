"""Slicing and shape ops (cases_shapes.cpp): Python slices with strides (negative too), lax.slice,
reshape, transpose, moveaxis/swapaxes, concatenate, stack, split, pad (jnp and lax, with negative
and interior padding), broadcast_to / broadcast_in_dim, squeeze / expand_dims, flip / rev,
ravel; in several dtypes. All data movement: compared exactly.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

DT = {"f32": np.float32, "i32": np.int32, "b": np.bool_, "bf16": jnp.bfloat16,
      "c128": np.complex128, "u32": np.uint32, "f16": np.float16, "i64": np.int64}


def arr(shape, dt):
    v = np.arange(int(np.prod(shape))).reshape(shape)
    if dt == "b":
        return v % 3 == 1
    if dt == "c128":
        return v + 1j * (100 - v)
    if dt == "bf16":
        return jnp.asarray(v - 7, jnp.bfloat16)
    return (v if dt == "u32" else v - 7).astype(DT[dt])


def build(add):
    for dt in DT:
        x = arr((4, 5, 6), dt)
        add(f"slice_basic_{dt}", lambda a: a[1:3, :, 2:5], x)
        add(f"slice_step_{dt}", lambda a: a[::2, 1::3, ::-2], x)
        add(f"slice_neg_{dt}", lambda a: a[-1:-4:-1, -2:, 5:0:-3], x)
        add(f"slice_oob_{dt}", lambda a: a[2:100, -100:2, 4:2], x)
        add(f"lax_slice_{dt}", lambda a: lax.slice(a, (0, 1, 1), (4, 5, 6), (3, 2, 2)), x)
        add(f"index_row_{dt}", lambda a: a[-2], x)
        add(f"reshape_{dt}", lambda a: jnp.reshape(a, (6, -1, 2)), x)
        add(f"ravel_{dt}", lambda a: jnp.ravel(a), x)
        add(f"transpose_{dt}", lambda a: jnp.transpose(a, (2, 0, 1)), x)
        add(f"transpose_rev_{dt}", lambda a: jnp.transpose(a), x)
        add(f"moveaxis_{dt}", lambda a: jnp.moveaxis(a, 0, -1), x)
        add(f"swapaxes_{dt}", lambda a: jnp.swapaxes(a, 0, 2), x)
        y = arr((4, 2, 6), dt)
        add(f"concatenate_{dt}", lambda a, b: jnp.concatenate([a, b, a], axis=1), x, y)
        add(f"stack_{dt}", lambda a, b: jnp.stack([a, b], axis=-1), y, y[::-1])
        add(f"split_{dt}", lambda a: jnp.split(a, 2, axis=0), x)
        add(f"split_idx_{dt}", lambda a: jnp.split(a, [1, 4], axis=2), x)
        add(f"pad_{dt}", lambda a: jnp.pad(a, ((1, 0), (0, 2), (2, 1))), x)
        add(f"lax_pad_{dt}", lambda a, v: lax.pad(a, v, ((1, -1, 1), (-2, 1, 0), (0, 0, 2))),
            x, np.asarray(x).reshape(-1)[3:4].reshape(()) if dt != "bf16"
            else jnp.asarray(x).reshape(-1)[3])
        add(f"broadcast_to_{dt}", lambda a: jnp.broadcast_to(a, (3, 4, 2, 6)), y)
        add(f"broadcast_in_dim_{dt}", lambda a: lax.broadcast_in_dim(a, (4, 3, 2, 6), (0, 2, 3)),
            y)
        z = arr((1, 5, 1, 3), dt)
        add(f"squeeze_{dt}", lambda a: jnp.squeeze(a), z)
        add(f"squeeze_axis_{dt}", lambda a: jnp.squeeze(a, axis=2), z)
        add(f"expand_dims_{dt}", lambda a: jnp.expand_dims(a, 1), y)
        add(f"expand_dims_neg_{dt}", lambda a: jnp.expand_dims(a, -1), y)
        add(f"flip_{dt}", lambda a: jnp.flip(a, axis=(0, 2)), x)
        add(f"flip_all_{dt}", lambda a: jnp.flip(a), x)
        add(f"rev_{dt}", lambda a: lax.rev(a, (1,)), x)
    # jnp.pad with a value, asymmetric widths, an empty result axis
    add("pad_value_f64", lambda a: jnp.pad(a, ((2, 3), (0, 1)), constant_values=-1.5),
        np.arange(6, dtype=np.float64).reshape(2, 3))
    add("lax_pad_neg_all_f32",
        lambda a: lax.pad(a, np.float32(0), ((-1, -2, 0), (-3, 0, 1))),
        np.arange(30, dtype=np.float32).reshape(5, 6))
    add("lax_pad_interior_i32", lambda a: lax.pad(a, np.int32(9), ((0, 0, 3), (1, 1, 1))),
        np.arange(6, dtype=np.int32).reshape(2, 3))
    add("slice_empty_f32", lambda a: a[3:1], np.arange(5, dtype=np.float32))
    add("concatenate_empty_f32", lambda a, b: jnp.concatenate([a, b]),
        np.zeros((0, 3), np.float32), np.ones((2, 3), np.float32))
    add("reshape_scalar_f32", lambda a: jnp.reshape(a, ()), np.array([2.5], np.float32))
    add("broadcast_scalar_i32", lambda a: jnp.broadcast_to(a, (2, 3)), np.array(7, np.int32))

    # Creation (dtypes given: x64 would make jnp's defaults 64-bit, spmd's are 32-bit).
    add("arange_i32", lambda: jnp.arange(7, dtype=jnp.int32))
    add("arange_step_f32", lambda: jnp.arange(-1.0, 2.0, 0.25, dtype=jnp.float32))
    add("arange_neg_f64", lambda: jnp.arange(5.0, -3.0, -1.5, dtype=jnp.float64))
    add("linspace_f32", lambda: jnp.linspace(-1.0, 2.0, 7, dtype=jnp.float32))
    add("linspace_noend_f64", lambda: jnp.linspace(0.0, 1.0, 5, endpoint=False,
                                                  dtype=jnp.float64))
    add("eye_f32", lambda: jnp.eye(3, 4, k=1, dtype=jnp.float32))
    add("eye_neg_k_i32", lambda: jnp.eye(4, k=-2, dtype=jnp.int32))
    add("iota_u32", lambda: lax.broadcasted_iota(jnp.uint32, (2, 3), 1))
    add("full_bf16", lambda: jnp.full((2, 2), 1.7, dtype=jnp.bfloat16))
    add("zeros_like_c64", lambda a: jnp.zeros_like(a), np.ones(3, np.complex64))
    add("ones_f16", lambda: jnp.ones((3,), jnp.float16))
