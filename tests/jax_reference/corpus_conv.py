"""Convolutions and windowed reductions (cases_conv.cpp): lax.conv_general_dilated with strides,
padding (SAME, VALID, explicit, negative), lhs/rhs dilation, feature and batch groups, layouts
(NCHW/OIHW, NHWC/HWIO, 1-D, 3-D), in float32, float64, float16 and bfloat16; lax.reduce_window
(sum, max, min; strides, padding, base and window dilation) and flax-style max / avg pooling.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax


def build(add):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)     # NCHW
    w = rng.standard_normal((6, 4, 3, 2)).astype(np.float32)     # OIHW
    convs = {
        "valid": dict(window_strides=(1, 1), padding="VALID"),
        "same": dict(window_strides=(1, 1), padding="SAME"),
        "stride": dict(window_strides=(2, 3), padding="SAME"),
        "explicit": dict(window_strides=(1, 2), padding=((2, 1), (0, 3))),
        "negpad": dict(window_strides=(1, 1), padding=((-1, 1), (1, -1))),
        "lhsdil": dict(window_strides=(1, 1), padding=((1, 1), (2, 0)), lhs_dilation=(2, 1)),
        "rhsdil": dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 2)),
        "alldil": dict(window_strides=(2, 1), padding=((0, 1), (1, 0)), lhs_dilation=(1, 2),
                       rhs_dilation=(2, 1)),
    }
    for name, kw in convs.items():
        add(f"conv_{name}_f32", lambda a, b, kw=kw: lax.conv_general_dilated(a, b, **kw), x, w)
    for dt, t in (("f64", np.float64), ("f16", np.float16), ("bf16", jnp.bfloat16)):
        xa, wa = jnp.asarray(x, t), jnp.asarray(w, t)
        if dt == "f64":
            xa, wa = x.astype(np.float64), w.astype(np.float64)
        for name in ("valid", "stride", "alldil"):
            add(f"conv_{name}_{dt}", lambda a, b, kw=convs[name]: lax.conv_general_dilated(
                a, b, **kw), xa, wa)
    # Layouts
    xh = np.transpose(x, (0, 2, 3, 1)).copy()   # NHWC
    wh = np.transpose(w, (2, 3, 1, 0)).copy()   # HWIO
    add("conv_nhwc_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (1, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), xh, wh)
    add("conv_nhwc_to_nchw_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (2, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NCHW")), xh, wh)
    add("conv_chwn_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "SAME", dimension_numbers=("CHWN", "IOHW", "NHWC")),
        np.transpose(x, (1, 2, 3, 0)).copy(), np.transpose(w, (1, 0, 2, 3)).copy())
    # Groups
    wg = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    add("conv_groups2_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "SAME", feature_group_count=2), x, wg)
    wd = rng.standard_normal((4, 1, 2, 2)).astype(np.float32)
    add("conv_depthwise_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "VALID", feature_group_count=4), x, wd)
    wb = rng.standard_normal((6, 4, 2, 2)).astype(np.float32)
    add("conv_batch_groups_f32", lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "VALID", batch_group_count=2), x, wb)
    # 1-D and 3-D
    x1 = rng.standard_normal((3, 2, 11)).astype(np.float32)
    w1 = rng.standard_normal((4, 2, 3)).astype(np.float32)
    add("conv1d_f32", lambda a, b: lax.conv_general_dilated(a, b, (2,), ((1, 2),)), x1, w1)
    add("conv1d_nwc_f64", lambda a, b: lax.conv_general_dilated(
        a, b, (1,), "SAME", rhs_dilation=(3,), dimension_numbers=("NWC", "WIO", "NWC")),
        np.transpose(x1, (0, 2, 1)).astype(np.float64), np.transpose(w1, (2, 1, 0)).astype(
            np.float64))
    x3 = rng.standard_normal((1, 2, 4, 5, 3)).astype(np.float32)
    w3 = rng.standard_normal((3, 2, 2, 3, 2)).astype(np.float32)
    add("conv3d_f32", lambda a, b: lax.conv_general_dilated(a, b, (1, 2, 1), "SAME"), x3, w3)
    add("lax_conv_f32", lambda a, b: lax.conv(a, b, (1, 1), "SAME"), x, w)

    # reduce_window
    r = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    windows = {
        "w22": dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
                    padding="VALID"),
        "w33same": dict(window_dimensions=(1, 3, 3, 1), window_strides=(1, 1, 1, 1),
                        padding="SAME"),
        "w32s2": dict(window_dimensions=(1, 3, 2, 1), window_strides=(1, 2, 1, 1),
                      padding=((0, 0), (1, 1), (0, 1), (0, 0))),
        "wdil": dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 1, 1, 1),
                     padding="VALID", window_dilation=(1, 2, 3, 1)),
        "bdil": dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 1, 2, 1),
                     padding="VALID", base_dilation=(1, 2, 1, 1)),
    }
    comps = {"sum": (lax.add, 0.0), "max": (lax.max, -np.inf), "min": (lax.min, np.inf)}
    for wn, kw in windows.items():
        for cn, (op, init) in comps.items():
            add(f"reduce_window_{cn}_{wn}_f32",
                lambda a, op=op, init=init, kw=kw: lax.reduce_window(a, np.float32(init), op, **kw),
                r)
    for dt, t in (("f64", np.float64), ("bf16", jnp.bfloat16), ("f16", np.float16)):
        ra = jnp.asarray(r, t) if dt == "bf16" else r.astype(t)
        for cn in ("sum", "max"):
            op, init = comps[cn]
            add(f"reduce_window_{cn}_w33same_{dt}",
                lambda a, op=op, init=init: lax.reduce_window(
                    a, jnp.asarray(init, a.dtype), op, **windows["w33same"]), ra)
    add("reduce_window_max_i32", lambda a: lax.reduce_window(
        a, np.int32(np.iinfo(np.int32).min), lax.max, (2, 2), (1, 1), "SAME"),
        np.arange(20, dtype=np.int32).reshape(4, 5) % 7)
    add("reduce_window_init1_f32", lambda a: lax.reduce_window(
        a, np.float32(1.0), lax.add, (2, 3), (1, 2), ((1, 0), (0, 2))),
        np.arange(20, dtype=np.float32).reshape(4, 5))
    # flax.linen pooling over (batch, spatial..., features), written with reduce_window as flax does
    def max_pool(a, window, strides, padding):
        return lax.reduce_window(a, -jnp.inf, lax.max, (1,) + window + (1,),
                                 (1,) + strides + (1,), padding if isinstance(padding, str)
                                 else ((0, 0),) + tuple(padding) + ((0, 0),))

    def avg_pool(a, window, strides, padding):
        s = lax.reduce_window(a, 0.0, lax.add, (1,) + window + (1,), (1,) + strides + (1,),
                              padding if isinstance(padding, str)
                              else ((0, 0),) + tuple(padding) + ((0, 0),))
        return s / np.prod(window)

    add("max_pool_f32", lambda a: max_pool(a, (2, 2), (2, 2), "VALID"), r)
    add("max_pool_same_f32", lambda a: max_pool(a, (3, 3), (2, 2), "SAME"), r)
    add("avg_pool_f32", lambda a: avg_pool(a, (2, 3), (1, 1), "VALID"), r)
    add("avg_pool_pad_f32", lambda a: avg_pool(a, (3, 3), (2, 2), ((1, 1), (1, 1))), r)
