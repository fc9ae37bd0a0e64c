"""The transformations composed (cases_transforms.cpp is the spmd side): vmap's in_axes and
out_axes, nested vmap, vmap with an axis name, grad of grad, argnums, value_and_grad and has_aux,
vjp and jvp with pytrees, jacfwd / jacrev / hessian, linearize, checkpoint, stop_gradient, and
custom_jvp / custom_vjp functions under grad, jvp and vmap."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def build(add):
    rng = np.random.default_rng(320)

    def normal(shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    # ---- vmap: in_axes, out_axes, nesting ----
    add("vmap_in_axes_1_none", jax.vmap(lambda a, v: a * v, in_axes=(1, None)),
        normal((3, 5)), normal((3,)))
    add("vmap_out_axes_1", jax.vmap(lambda a: jnp.sin(a) * 2.0, out_axes=1), normal((5, 3)))
    add("vmap_in_1_0_out_1", jax.vmap(lambda a, b: a @ b, in_axes=(1, 0), out_axes=1),
        normal((3, 5, 4)), normal((5, 4, 2)))
    add("vmap_negative_axes", jax.vmap(lambda a: jnp.sum(a, axis=0), in_axes=-1, out_axes=-1),
        normal((3, 4, 5)))
    add("vmap_out_axes_tuple", jax.vmap(lambda a: (jnp.sum(a), a * a), out_axes=(0, 1)),
        normal((3, 4)))
    add("vmap_out_axes_none",
        jax.vmap(lambda a, c: (a * 2.0, c + 1.0), in_axes=(0, None), out_axes=(0, None)),
        normal((3, 4)), normal((2,)))
    add("vmap_axis_size", jax.vmap(lambda c: c * 2.0, in_axes=None, axis_size=3), normal((2,)))
    add("vmap_vmap_vdot", jax.vmap(jax.vmap(jnp.vdot)), normal((2, 3, 4)), normal((2, 3, 4)))
    add("vmap_vmap_outer",
        jax.vmap(jax.vmap(lambda a, b: a * b + 1.0, in_axes=(0, None)), in_axes=(None, 0)),
        normal((3, 4)), normal((5, 4)))
    add("vmap_vmap_axes",
        jax.vmap(jax.vmap(lambda a: jnp.sum(a * a), in_axes=1), in_axes=0, out_axes=1),
        normal((2, 3, 4)))
    add("vmap_matmul_lhs", jax.vmap(jnp.matmul, in_axes=(0, None)), normal((4, 2, 3)),
        normal((3, 5)))
    add("vmap_matmul_rhs", jax.vmap(jnp.matmul, in_axes=(None, 2)), normal((2, 3)),
        normal((3, 5, 4)))
    add("vmap_dict", lambda a, b: jax.vmap(lambda d: d["a"] * jnp.sum(d["b"]),
                                           in_axes=({"a": 0, "b": None},))({"a": a, "b": b}),
        normal((4, 3)), normal((2,)))
    add("vmap_psum", jax.vmap(lambda a: a / lax.psum(jnp.abs(a), "i"), axis_name="i"),
        normal((4, 3)))
    add("vmap_pmax_pmean",
        jax.vmap(lambda a: (lax.pmax(a, "i"), lax.pmean(a, "i"), lax.pmin(a, "i")),
                 axis_name="i"), normal((4, 3)))
    add("vmap_all_gather", jax.vmap(lambda a: lax.all_gather(a, "i") * 2.0, axis_name="i"),
        normal((3, 2)))
    add("vmap_axis_index",
        jax.vmap(lambda a: a * lax.axis_index("i").astype(jnp.float32), axis_name="i"),
        normal((4, 2)))
    add("vmap_nested_psum",
        jax.vmap(jax.vmap(lambda a: lax.psum(a, ("i", "j")), axis_name="j"), axis_name="i"),
        normal((2, 3, 2)))
    add("vmap_of_jit", jax.vmap(jax.jit(lambda a, b: jnp.tanh(a) @ b)), normal((3, 2, 4)),
        normal((3, 4, 2)))

    # ---- grad ----
    add("grad_of_grad", jax.grad(jax.grad(lambda a: jnp.sin(a) * a ** 3)), np.float32(0.7))
    add("grad_grad_grad", jax.grad(jax.grad(jax.grad(lambda a: jnp.exp(a) * jnp.cos(a)))),
        np.float64(0.3))
    add("grad_of_grad_vector",
        jax.grad(lambda v: jnp.sum(jax.grad(lambda u: jnp.sum(jnp.tanh(u) ** 2))(v) * v)),
        normal((5,)))
    f2 = lambda a, b: jnp.sum(jnp.tanh(a @ b) ** 2)
    add("grad_argnums_01", jax.grad(f2, argnums=(0, 1)), normal((3, 4)), normal((4, 2)))
    add("grad_argnums_1", jax.grad(f2, argnums=1), normal((3, 4)), normal((4, 2)))
    add("value_and_grad", jax.value_and_grad(lambda a: jnp.sum(jnp.sin(a) * a)), normal((3, 4)))
    add("value_and_grad_aux",
        jax.value_and_grad(lambda a: (jnp.sum(a ** 2), jnp.max(a, axis=0)), has_aux=True),
        normal((3, 4)))
    add("grad_aux",
        jax.grad(lambda a, b: (jnp.sum(a * b), (a + b, jnp.sum(b))), has_aux=True),
        normal((4,)), normal((4,)))
    add("grad_dict",
        lambda w, b, x: (lambda g: (g["b"], g["w"]))(jax.grad(
            lambda p: jnp.sum(jnp.tanh(x @ p["w"] + p["b"])))({"w": w, "b": b})),
        normal((4, 3)), normal((3,)), normal((2, 4)))
    add("grad_of_vmap",
        jax.grad(lambda a: jnp.sum(jax.vmap(jnp.dot)(a, jnp.sin(a)))), normal((3, 4)))
    add("vmap_of_grad", jax.vmap(jax.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2))), normal((3, 4)))
    add("vmap_of_grad_in_axes",
        jax.vmap(jax.grad(lambda v, w: jnp.sum(jnp.sin(v * w))), in_axes=(1, None)),
        normal((4, 3)), normal((4,)))
    add("grad_of_jit", jax.grad(jax.jit(lambda a: jnp.sum(jnp.exp(a) / (1.0 + a * a)))),
        normal((5,)))
    add("grad_stop_gradient",
        jax.grad(lambda a: jnp.sum(a * lax.stop_gradient(a) ** 2 + jnp.sin(a))), normal((4,)))
    add("grad_checkpoint",
        jax.grad(lambda a: jnp.sum(jax.checkpoint(lambda u: jnp.sin(jnp.cos(u)) * u)(a))),
        normal((4,)))
    add("grad_complex_input", jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 2 + jnp.real(z * z))),
        (normal((3,)) + 1j * normal((3,))).astype(np.complex64))
    add("grad_integer_pow", jax.grad(lambda a: jnp.sum(a ** 3 + a ** -2)), normal((4,)) + 2.0)

    # ---- vjp, jvp, linearize ----
    fo = lambda a, b: (jnp.sin(a) * b, jnp.sum(a * b, axis=0))
    add("vjp_two_outputs",
        lambda a, b, c1, c2: jax.vjp(fo, a, b)[1]((c1, c2)),
        normal((3, 2)), normal((3, 2)), normal((3, 2)), normal((2,)))
    add("vjp_has_aux",
        lambda a, c: (lambda r: (r[0], r[1](c), r[2]))(
            jax.vjp(lambda u: (jnp.exp(u), jnp.sum(u)), a, has_aux=True)),
        normal((4,)), normal((4,)))
    add("jvp_two_args",
        lambda a, b, ta, tb: jax.jvp(lambda u, v: jnp.tanh(u) @ v, (a, b), (ta, tb)),
        normal((2, 3)), normal((3, 2)), normal((2, 3)), normal((3, 2)))
    add("jvp_has_aux",
        lambda a, t: jax.jvp(lambda u: (jnp.cos(u), u * 2.0), (a,), (t,), has_aux=True),
        normal((4,)), normal((4,)))
    add("jvp_of_grad",
        lambda a, t: jax.jvp(jax.grad(lambda u: jnp.sum(jnp.sin(u) ** 3)), (a,), (t,)),
        normal((4,)), normal((4,)))
    add("linearize",
        lambda a, t1, t2: (lambda r: (r[0], r[1](t1), r[1](t2)))(
            jax.linearize(lambda u: jnp.exp(u) * jnp.sum(u), a)),
        normal((3,)), normal((3,)), normal((3,)))
    add("vmap_of_jvp",
        jax.vmap(lambda a, t: jax.jvp(jnp.sin, (a,), (t,))), normal((3, 2)), normal((3, 2)))

    # ---- Jacobians ----
    fj = lambda v: jnp.stack([jnp.sum(jnp.sin(v)), v[0] * v[1], jnp.prod(v)])
    add("jacfwd", jax.jacfwd(fj), normal((4,)))
    add("jacrev", jax.jacrev(fj), normal((4,)))
    add("jacfwd_matrix", jax.jacfwd(lambda m: jnp.tanh(m) @ m.T), normal((2, 3)))
    add("jacrev_matrix", jax.jacrev(lambda m: jnp.tanh(m) @ m.T), normal((2, 3)))
    add("jacfwd_argnums", jax.jacfwd(lambda a, b: a * jnp.sum(b), argnums=(0, 1)),
        normal((3,)), normal((2,)))
    add("jacrev_argnums", jax.jacrev(lambda a, b: a * jnp.sum(b), argnums=(0, 1)),
        normal((3,)), normal((2,)))
    add("jacrev_has_aux", jax.jacrev(lambda a: (jnp.sin(a), jnp.sum(a)), has_aux=True),
        normal((3,)))
    add("hessian", jax.hessian(lambda v: jnp.sum(jnp.sin(v) * v[::-1] ** 2)),
        normal((4,), np.float64))
    add("hessian_matrix", jax.hessian(lambda m: jnp.sum(jnp.tanh(m @ m))),
        normal((2, 2), np.float64))
    add("jacfwd_of_jacrev", jax.jacfwd(jax.jacrev(lambda v: jnp.exp(v) * v[0])),
        normal((3,), np.float64))

    # ---- custom_jvp / custom_vjp ----
    @jax.custom_jvp
    def log1pexp(x):
        return jnp.log1p(jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(p, t):
        (x,), (tx,) = p, t
        return log1pexp(x), tx * (1.0 - 1.0 / (1.0 + jnp.exp(x)))

    xs = normal((5,)) * 3.0
    add("custom_jvp_value", log1pexp, xs)
    add("custom_jvp_grad", jax.grad(lambda a: jnp.sum(log1pexp(a) * a)), xs)
    add("custom_jvp_jvp", lambda a, t: jax.jvp(log1pexp, (a,), (t,)), xs, normal((5,)))
    add("custom_jvp_vmap", jax.vmap(log1pexp), normal((3, 5)))
    add("custom_jvp_vmap_grad", jax.vmap(jax.grad(lambda a: jnp.sum(log1pexp(a) ** 2))),
        normal((3, 5)))
    add("custom_jvp_grad_of_grad", jax.grad(jax.grad(lambda a: log1pexp(a) * a)),
        np.float32(0.4))

    @jax.custom_jvp
    def prod2(x, y):
        return x * y

    @prod2.defjvp
    def prod2_jvp(p, t):
        (x, y), (tx, ty) = p, t
        # Deliberately not the true derivative: checks the rule is what is used.
        return x * y, 2.0 * tx * y + x * ty

    add("custom_jvp_two_args_grad",
        jax.grad(lambda a, b: jnp.sum(prod2(a, b)), argnums=(0, 1)), normal((3,)), normal((3,)))
    add("custom_jvp_two_args_vmap", jax.vmap(prod2, in_axes=(0, None)), normal((2, 3)),
        normal((3,)))

    @jax.custom_vjp
    def clip_gradient(x):
        return x

    def clip_fwd(x):
        return x, None

    def clip_bwd(_, g):
        return (jnp.clip(g, -0.5, 0.5),)

    clip_gradient.defvjp(clip_fwd, clip_bwd)
    add("custom_vjp_clip_grad", jax.grad(lambda a, w: jnp.sum(clip_gradient(a) * w)),
        normal((6,)), normal((6,)))
    add("custom_vjp_clip_vmap_grad",
        jax.vmap(jax.grad(lambda a, w: jnp.sum(clip_gradient(a) * w)), in_axes=(0, None)),
        normal((3, 6)), normal((6,)) * 2.0)

    @jax.custom_vjp
    def sin_res(x, y):
        return jnp.sin(x) * y

    def sin_res_fwd(x, y):
        return sin_res(x, y), (jnp.cos(x), jnp.sin(x), y)

    def sin_res_bwd(res, g):
        c, s, y = res
        return (c * y * g * 3.0, s * g)  # x's cotangent scaled: the rule is what is used

    sin_res.defvjp(sin_res_fwd, sin_res_bwd)
    add("custom_vjp_value", sin_res, normal((4,)), normal((4,)))
    add("custom_vjp_grad", jax.grad(lambda a, b: jnp.sum(sin_res(a, b)), argnums=(0, 1)),
        normal((4,)), normal((4,)))
    add("custom_vjp_vmap", jax.vmap(sin_res, in_axes=(0, None)), normal((3, 4)), normal((4,)))
    add("custom_vjp_vmap_grad",
        jax.vmap(jax.grad(lambda a, b: jnp.sum(sin_res(a, b)), argnums=(0, 1))),
        normal((3, 4)), normal((3, 4)))
    add("custom_vjp_grad_of_vmap",
        jax.grad(lambda a, b: jnp.sum(jax.vmap(sin_res)(a, b) ** 2)), normal((2, 4)),
        normal((2, 4)))
    add("custom_vjp_under_jit_grad",
        jax.grad(jax.jit(lambda a: jnp.sum(sin_res(a, a * 2.0)))), normal((4,)))
