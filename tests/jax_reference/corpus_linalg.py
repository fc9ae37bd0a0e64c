"""Linear algebra and products (cases_linalg.cpp): cholesky, solve, inv, det, slogdet, eigh, qr,
svd, lu, triangular_solve (every flag), cho_solve, lstsq, in float32 and float64, batched; and
matmul, dot, vdot, tensordot, einsum, dot_general in several dtypes.

Eigenvectors and singular vectors are unique only up to sign (and QR's factors up to the signs of
q's columns and r's rows): those cases return invariants that both sides compute — eigenvalues,
|V|, V diag(w) V^T, V^T V; q r, |r|; u diag(s) vh, |u|, |vh| — never the raw factors.
"""
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax


def build(add):
    rng = np.random.default_rng(5)
    n = 4
    m = rng.standard_normal((2, n, n))
    spd = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    gen = m + 2 * np.eye(n)
    gen[1, 0] *= -1  # a negative determinant
    sym = (m + np.swapaxes(m, -1, -2)) / 2 + np.diag(np.arange(n) * 1.5)
    rect = rng.standard_normal((2, 5, 3))
    wide = rng.standard_normal((3, 5))
    b = rng.standard_normal((2, n, 3))
    bv = rng.standard_normal((2, n))
    for dt, t in (("f32", np.float32), ("f64", np.float64)):
        S, G, Y, R, W = (a.astype(t) for a in (spd, gen, sym, rect, wide))
        add(f"cholesky_{dt}", jnp.linalg.cholesky, S)
        add(f"solve_{dt}", jnp.linalg.solve, G, b.astype(t))
        add(f"solve_vec_{dt}", jnp.linalg.solve, G[0], bv[0].astype(t))
        add(f"inv_{dt}", jnp.linalg.inv, G)
        add(f"det_{dt}", jnp.linalg.det, G)
        add(f"slogdet_{dt}", lambda a: tuple(jnp.linalg.slogdet(a)), G)

        def eigh_inv(a):
            w, v = jnp.linalg.eigh(a)
            return w, jnp.abs(v), (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2), \
                jnp.swapaxes(v, -1, -2) @ v
        add(f"eigh_{dt}", eigh_inv, Y)

        def qr_inv(a, mode):
            q, r = jnp.linalg.qr(a, mode=mode)
            return q @ r, jnp.abs(r), jnp.abs(q), jnp.swapaxes(q, -1, -2) @ q
        add(f"qr_reduced_{dt}", lambda a: qr_inv(a, "reduced"), R)
        add(f"qr_square_{dt}", lambda a: qr_inv(a, "reduced"), G)
        add(f"qr_complete_{dt}", lambda a: qr_inv(a, "complete")[:2] + qr_inv(a, "complete")[3:],
            R)
        add(f"qr_r_{dt}", lambda a: jnp.abs(jnp.linalg.qr(a, mode="r")), R)

        def svd_inv(a, full):
            u, s, vh = jnp.linalg.svd(a, full_matrices=full)
            k = s.shape[-1]
            return s, (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], \
                jnp.abs(u[..., :, :k]), jnp.abs(vh[..., :k, :])
        add(f"svd_{dt}", lambda a: svd_inv(a, True), R)
        add(f"svd_reduced_{dt}", lambda a: svd_inv(a, False), R)
        add(f"svd_wide_{dt}", lambda a: svd_inv(a, False), W)
        add(f"svd_values_{dt}", lambda a: jnp.linalg.svd(a, compute_uv=False), G)
        add(f"lu_{dt}", lambda a: tuple(lax.linalg.lu(a)), G)
        add(f"cho_solve_{dt}", lambda l, bb: jsl.cho_solve((l, True), bb),
            np.linalg.cholesky(S).astype(t), b.astype(t))
        # rank: int64 with x64 (JAX's default integer), int32 in spmd (its default integer)
        add(f"lstsq_{dt}", lambda a, bb: (lambda x, r, k, s: (x, r, k.astype(jnp.int32), s))(
            *jnp.linalg.lstsq(a, bb)),
            R[0], rng.standard_normal((5, 2)).astype(t))
        for left in (True, False):
            for lower in (True, False):
                for trans in (False, True):
                    for unit in (False, True):
                        if dt == "f32" and (trans or unit):
                            continue
                        name = (f"triangular_solve_{'l' if left else 'r'}{'lo' if lower else 'up'}"
                                f"{'t' if trans else 'n'}{'u' if unit else 'd'}_{dt}")
                        rhs = b.astype(t) if left else np.swapaxes(b, -1, -2).astype(t)
                        add(name, lambda a, bb, left=left, lower=lower, trans=trans, unit=unit:
                            lax.linalg.triangular_solve(a, bb, left_side=left, lower=lower,
                                                        transpose_a=trans, unit_diagonal=unit),
                            G, rhs)
    # Singular matrices: det 0, slogdet (0, -inf).
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    add("det_singular_f64", jnp.linalg.det, sing)
    add("slogdet_singular_f64", lambda a: tuple(jnp.linalg.slogdet(a)), np.zeros((3, 3)))
    add("cholesky_not_pd_f64", jnp.linalg.cholesky, np.array([[1.0, 2.0], [2.0, 1.0]]))

    # Products
    a = rng.standard_normal((3, 4))
    c = rng.standard_normal((4, 5))
    for dt, t in (("f32", np.float32), ("f64", np.float64), ("c64", np.complex64),
                  ("i32", np.int32), ("bf16", jnp.bfloat16), ("f16", np.float16)):
        def conv(v):
            if dt == "i32":
                return np.round(v * 3).astype(np.int32)
            if dt == "c64":
                return (v + 1j * v[::-1]).astype(np.complex64)
            return jnp.asarray(v, t) if dt == "bf16" else v.astype(t)
        A, C = conv(a), conv(c)
        add(f"matmul_{dt}", jnp.matmul, A, C)
        add(f"dot_vec_{dt}", jnp.dot, A, conv(c[:, 0]))
        add(f"vdot_{dt}", jnp.vdot, A, conv(a[::-1]))
        add(f"einsum_ij_jk_{dt}", lambda x, y: jnp.einsum("ij,jk->ki", x, y), A, C)
    x3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y3 = rng.standard_normal((2, 4, 5)).astype(np.float32)
    add("matmul_batched_f32", jnp.matmul, x3, y3)
    add("matmul_bcast_f32", jnp.matmul, x3, y3[0])
    add("einsum_batch_f32", lambda x, y: jnp.einsum("bij,bjk->bik", x, y), x3, y3)
    add("einsum_trace_f32", lambda x: jnp.einsum("ii->", x), x3[0, :3, :3])
    add("einsum_diag_f32", lambda x: jnp.einsum("ii->i", x), x3[0, :3, :3])
    add("einsum_ellipsis_f32", lambda x, y: jnp.einsum("...ij,...jk->...ik", x, y), x3, y3)
    add("einsum_three_f32", lambda x, y, z: jnp.einsum("bij,bjk,bk->bi", x, y, z), x3, y3,
        rng.standard_normal((2, 5)).astype(np.float32))
    add("einsum_implicit_f32", lambda x, y: jnp.einsum("ij,jk", x, y), x3[0], y3[0])
    add("tensordot_f32", lambda x, y: jnp.tensordot(x, y, axes=([0, 2], [0, 1])), x3, y3)
    add("tensordot_int_f64", lambda x, y: jnp.tensordot(x, y, 1), x3.astype(np.float64),
        y3[0].astype(np.float64))
    add("dot_general_f32", lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
        x3, y3)
    add("dot_general_nobatch_f64", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))),
        a, c)
