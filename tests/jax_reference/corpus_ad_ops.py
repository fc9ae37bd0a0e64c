"""grad, jvp and vmap of every op family (cases_ad_ops.cpp is the spmd side).

Each op program f(*args) -> one array gives three cases:
    <op>_grad  inputs args..., w        outputs d/d(diff args) of sum(real(f(args) * w))
    <op>_jvp   inputs args..., tangents outputs f(args), J t   (tangents of the diff args)
    <op>_vmap  inputs batched args      outputs vmap(f, in_axes)(...)  (batch of 3 on axis 0;
                                                                        integer args unmapped)
Ops marked ad=False (integer outputs) give the vmap case only.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def build(add):
    rng = np.random.default_rng(32)

    def normal(shape, dtype=np.float32):
        if np.dtype(dtype).kind == "c":
            return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    def positive(shape, dtype=np.float32):
        return rng.uniform(0.5, 2.0, shape).astype(dtype)

    def op(name, f, *args, diff=None, ad=True):
        n = len(args)
        floating = [np.asarray(a).dtype.kind in "fc" for a in args]
        diff = [k for k in range(n) if floating[k]] if diff is None else diff
        out = f(*args)
        if ad:
            w = normal(out.shape, np.asarray(out).dtype)

            def sub(xs, d):
                full = list(xs)
                for i, k in enumerate(diff):
                    full[k] = d[i]
                return full

            def g(*a):
                xs, w = a[:n], a[n]
                loss = lambda *d: jnp.sum(jnp.real(f(*sub(xs, d)) * w))
                return jax.grad(loss, argnums=tuple(range(len(diff))))(*[xs[k] for k in diff])

            add(name + "_grad", g, *args, w)
            ts = [normal(np.shape(args[k]), np.asarray(args[k]).dtype) for k in diff]

            def j(*a):
                xs, t = a[:n], a[n:]
                return jax.jvp(lambda *d: f(*sub(xs, d)), tuple(xs[k] for k in diff), tuple(t))

            add(name + "_jvp", j, *args, *ts)
        in_axes = tuple(0 if fl else None for fl in floating)
        scale = np.array([0.7, 1.0, 1.3])
        bargs = [
            (np.stack([np.asarray(a) * s for s in scale]).astype(np.asarray(a).dtype)
             if fl else a)
            for a, fl in zip(args, floating)
        ]
        add(name + "_vmap", jax.vmap(f, in_axes=in_axes), *bargs)

    x = normal((3, 4))
    y = normal((3, 4))
    p = positive((3, 4))

    # ---- elementwise (float32) ----
    op("sin", jnp.sin, x)
    op("cos", jnp.cos, x)
    op("tanh", jnp.tanh, x)
    op("exp", jnp.exp, x)
    op("log", jnp.log, p)
    op("log1p", jnp.log1p, p)
    op("expm1", jnp.expm1, x)
    op("sqrt", jnp.sqrt, p)
    op("rsqrt", lax.rsqrt, p)
    op("logistic", jax.nn.sigmoid, x)
    op("erf", lax.erf, x)
    op("abs", jnp.abs, x)
    op("square", jnp.square, x)
    op("reciprocal", jnp.reciprocal, p)
    op("sin_f64", jnp.sin, normal((5,), np.float64))
    op("add", jnp.add, x, y)
    op("sub", jnp.subtract, x, y)
    op("mul", jnp.multiply, x, y)
    op("div", jnp.divide, x, p)
    op("pow", jnp.power, p, y)
    op("maximum", jnp.maximum, x, y)
    op("minimum", jnp.minimum, x, y)
    op("arctan2", jnp.arctan2, x, y)
    op("where", lambda a, b: jnp.where(a > 0, a, b * b), x, y)
    op("clip", lambda a: jnp.clip(a, -0.5, 0.5), x)
    op("mul_broadcast", lambda a, b: a * b, x, normal((4,)))

    # ---- reductions ----
    op("sum_axis0", lambda a: jnp.sum(a, axis=0), x)
    op("sum_all", jnp.sum, x)
    op("mean_axis1", lambda a: jnp.mean(a, axis=1), x)
    op("max_axis1", lambda a: jnp.max(a, axis=1), x)
    op("min_axis0", lambda a: jnp.min(a, axis=0), x)
    op("prod_axis1", lambda a: jnp.prod(a, axis=1), x)
    op("var_axis1", lambda a: jnp.var(a, axis=1), x)
    op("logsumexp", lambda a: jax.nn.logsumexp(a, axis=1), x)
    op("softmax", lambda a: jax.nn.softmax(a, axis=-1), x)
    op("log_softmax", lambda a: jax.nn.log_softmax(a, axis=0), x)
    op("argmax", lambda a: jnp.argmax(a, axis=1).astype(jnp.int32), x, ad=False)

    # ---- indexing ----
    idx = np.array([2, 0, 1, 2, -1], np.int32)
    op("take_axis0", lambda a, i: jnp.take(a, i, axis=0, mode="clip"), x, idx)
    op("take_axis1", lambda a, i: jnp.take(a, i, axis=1), x, np.array([3, 1, 1], np.int32))
    op("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=1), x,
       np.array([[0, 3], [1, 1], [2, 0]], np.int32))
    op("getitem_array", lambda a, i: a[i], x, np.array([1, 1, 0], np.int32))
    uidx = np.array([2, 0], np.int32)
    op("at_add", lambda a, i, v: jnp.asarray(a).at[i].add(v), x, np.array([2, 0, 2], np.int32),
       normal((3, 4)))
    op("at_set", lambda a, i, v: jnp.asarray(a).at[i].set(v), x, uidx, normal((2, 4)))
    op("at_mul", lambda a, i, v: jnp.asarray(a).at[i].multiply(v, unique_indices=True), x, uidx, normal((2, 4)))
    op("at_max", lambda a, i, v: jnp.asarray(a).at[i].max(v), x, uidx, normal((2, 4)))
    op("dynamic_slice", lambda a, i: lax.dynamic_slice(a, (i, jnp.int32(1)), (2, 2)), x,
       np.int32(1))
    op("dynamic_update_slice",
       lambda a, u, i: lax.dynamic_update_slice(a, u, (jnp.int32(1), i)), x, normal((2, 2)),
       np.int32(2))

    # ---- slicing and shapes ----
    z = normal((2, 3, 4))
    op("slice_step", lambda a: a[1:3, ::2], x)
    op("slice_reverse", lambda a: a[::-1, 1:], x)
    op("reshape", lambda a: jnp.reshape(a, (2, 6)), x)
    op("transpose", lambda a: jnp.transpose(a, (2, 0, 1)), z)
    op("concatenate", lambda a, b: jnp.concatenate([a, b], axis=1), x, y)
    op("stack", lambda a, b: jnp.stack([a, b], axis=1), x, y)
    op("pad", lambda a: jnp.pad(a, ((1, 0), (2, 1))), x)
    op("lax_pad_interior", lambda a: lax.pad(a, jnp.zeros((), a.dtype), ((1, 0, 1), (0, 2, 0))), x)
    op("flip", lambda a: jnp.flip(a, axis=1), x)
    op("broadcast_to", lambda a: jnp.broadcast_to(a, (2, 3, 4)), x)
    op("expand_squeeze", lambda a: jnp.squeeze(jnp.expand_dims(a, 1) * 2.0, axis=1), x)
    op("split_second", lambda a: jnp.split(a, 2, axis=1)[1], x)
    op("moveaxis", lambda a: jnp.moveaxis(a, 0, 2), z)

    # ---- dot, matmul, einsum ----
    a34, b45 = normal((3, 4)), normal((4, 5))
    op("matmul", jnp.matmul, a34, b45)
    op("matmul_batched", jnp.matmul, normal((2, 3, 4)), normal((2, 4, 5)))
    op("matmul_broadcast", jnp.matmul, normal((2, 3, 4)), b45)
    op("matvec", jnp.matmul, a34, normal((4,)))
    op("dot_vec", jnp.dot, normal((4,)), normal((4,)))
    op("vdot", jnp.vdot, x, y)
    op("einsum_ij_jk", lambda a, b: jnp.einsum("ij,jk->ik", a, b), a34, b45)
    op("einsum_batch", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), normal((2, 3, 4)),
       normal((2, 4, 2)))
    op("einsum_trace", lambda a: jnp.einsum("ii->", a), normal((3, 3)))
    op("tensordot", lambda a, b: jnp.tensordot(a, b, axes=([1, 2], [0, 1])), z,
       normal((3, 4, 2)))
    op("dot_general_batch",
       lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), normal((2, 3, 4)),
       normal((2, 4, 3)))

    # ---- convolution (float32) ----
    lhs, rhs = normal((2, 3, 6, 6)), normal((4, 3, 3, 3))
    op("conv_same", lambda l, r: lax.conv_general_dilated(l, r, (1, 1), "SAME"), lhs, rhs)
    op("conv_stride_valid", lambda l, r: lax.conv_general_dilated(l, r, (2, 2), "VALID"),
       lhs, rhs)
    op("conv_nhwc",
       lambda l, r: lax.conv_general_dilated(l, r, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC")),
       normal((2, 5, 5, 3)), normal((3, 3, 3, 4)))
    op("conv_groups",
       lambda l, r: lax.conv_general_dilated(l, r, (1, 1), ((1, 1), (0, 0)),
                                             feature_group_count=3),
       lhs, normal((6, 1, 3, 3)))
    op("conv_dilated",
       lambda l, r: lax.conv_general_dilated(l, r, (1, 1), ((1, 1), (1, 1)),
                                             lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
       lhs, rhs)
    op("conv_1d", lambda l, r: lax.conv_general_dilated(l, r, (1,), "SAME"),
       normal((2, 2, 7)), normal((3, 2, 3)))

    # ---- reduce_window ----
    op("reduce_window_sum",
       lambda a: lax.reduce_window(a, 0.0, lax.add, (2, 2), (1, 1), "VALID"), x)
    op("reduce_window_max",
       lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (2, 2), "SAME"), x)
    op("reduce_window_min",
       lambda a: lax.reduce_window(a, jnp.inf, lax.min, (1, 3), (1, 1), ((0, 0), (1, 1))), x)
    op("reduce_window_sum_4d",
       lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"), lhs)

    # ---- sort and cumulative ----
    op("sort", lambda a: jnp.sort(a, axis=-1), x)
    op("sort_axis0", lambda a: jnp.sort(a, axis=0), x)
    op("top_k", lambda a: lax.top_k(a, 2)[0], x)
    op("argsort", lambda a: jnp.argsort(a, axis=-1).astype(jnp.int32), x, ad=False)
    op("cumsum", lambda a: jnp.cumsum(a, axis=1), x)
    op("cumsum_reverse", lambda a: lax.cumsum(a, axis=0, reverse=True), x)
    op("cumprod", lambda a: jnp.cumprod(a, axis=1), x)
    op("cummax", lambda a: lax.cummax(a, axis=1), x)
    op("cummin", lambda a: lax.cummin(a, axis=0), x)

    # ---- linalg (float64) ----
    m = normal((3, 3), np.float64)
    spd = lambda a: a @ a.T + 3.0 * jnp.eye(3, dtype=a.dtype)
    op("cholesky", lambda a: jnp.linalg.cholesky(spd(a)), m)
    op("solve", lambda a, b: jnp.linalg.solve(spd(a), b), m, normal((3, 2), np.float64))
    op("solve_vec", lambda a, b: jnp.linalg.solve(spd(a), b), m, normal((3,), np.float64))
    op("eigh_values", lambda a: jnp.linalg.eigh(a + a.T)[0], m)
    op("inv", lambda a: jnp.linalg.inv(spd(a)), m)
    op("det", lambda a: jnp.linalg.det(a), m)
    op("slogdet", lambda a: jnp.linalg.slogdet(spd(a))[1], m)
    op("triangular_solve",
       lambda a, b: lax.linalg.triangular_solve(jnp.tril(a) + 3.0 * jnp.eye(3), b,
                                                left_side=True, lower=True),
       m, normal((3, 2), np.float64))
    op("cholesky_f32", lambda a: jnp.linalg.cholesky(spd(a)), normal((3, 3)))

    # ---- fft ----
    cx = normal((2, 8), np.complex64)
    op("fft", jnp.fft.fft, cx)
    op("ifft", jnp.fft.ifft, cx)
    op("rfft", jnp.fft.rfft, normal((2, 8)))
    op("irfft", jnp.fft.irfft, normal((2, 5), np.complex64))
    op("fft2", jnp.fft.fft2, normal((2, 4, 4), np.complex64))
    op("rfft_ortho", lambda a: jnp.fft.rfft(a, n=6, norm="ortho"), normal((3, 8)))
    op("fft_c128", jnp.fft.fft, normal((6,), np.complex128))
