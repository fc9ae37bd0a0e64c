"""scan, fori_loop, while_loop, cond and switch, alone and under vmap (batched predicates too),
grad and jvp (cases_control_flow.cpp is the spmd side)."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def build(add):
    rng = np.random.default_rng(3200)

    def normal(shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    # ---- scan ----
    def cum(c, x):
        return c + x, c * x

    add("scan", lambda c, xs: lax.scan(cum, c, xs), normal((3,)), normal((5, 3)))
    add("scan_reverse", lambda c, xs: lax.scan(cum, c, xs, reverse=True), normal((3,)),
        normal((5, 3)))
    add("scan_no_xs",
        lambda c: lax.scan(lambda c, _: (c * 0.9 + 1.0, jnp.sum(c)), c, None, length=4),
        normal((2,)))
    add("scan_pytree",
        lambda h, n, xs: lax.scan(lambda c, x: ((c[0] * x + c[1], c[1] + 1), (c[0], x * 2.0)),
                                  (h, n), xs),
        normal((2,)), np.int32(3), normal((4, 2)))
    add("scan_int", lambda c, xs: lax.scan(lambda c, x: (c * 2 + x, c), c, xs),
        np.int32(1), np.arange(6, dtype=np.int32))

    def rnn(w, h, xs):
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), jnp.sum(h)), h, xs)

    w, h0, xs = normal((3, 3)) * 0.5, normal((3,)), normal((6, 3))
    add("scan_rnn", rnn, w, h0, xs)
    add("scan_vmap_xs", jax.vmap(rnn, in_axes=(None, None, 0)), w, h0, normal((2, 6, 3)))
    add("scan_vmap_carry", jax.vmap(rnn, in_axes=(None, 0, None)), w, normal((4, 3)), xs)
    add("scan_vmap_all", jax.vmap(rnn, in_axes=(0, 0, 1)), normal((2, 3, 3)) * 0.5,
        normal((2, 3)), normal((6, 2, 3)))
    loss = lambda w, h, xs: (lambda r: jnp.sum(r[0] ** 2) + jnp.sum(r[1] * 0.1))(rnn(w, h, xs))
    add("scan_grad", jax.grad(loss, argnums=(0, 1, 2)), w, h0, xs)
    add("scan_jvp", lambda w, h, xs, tw, th: jax.jvp(lambda a, b: rnn(a, b, xs), (w, h), (tw, th)),
        w, h0, xs, normal((3, 3)), normal((3,)))
    add("scan_vmap_grad", jax.vmap(jax.grad(loss), in_axes=(None, 0, None)), w,
        normal((3, 3)), xs)
    add("scan_grad_reverse",
        jax.grad(lambda c, xs: jnp.sum(lax.scan(lambda c, x: (jnp.sin(c) * x, c), c, xs,
                                                reverse=True)[1])),
        normal((2,)), normal((4, 2)))
    add("map", lambda xs: lax.map(lambda x: jnp.sum(jnp.sin(x)) * x, xs), normal((4, 3)))

    # ---- fori_loop ----
    body = lambda i, c: c * 0.8 + jnp.sin(c) * i.astype(c.dtype)
    add("fori", lambda c: lax.fori_loop(0, 5, body, c), normal((3,)))
    add("fori_grad", jax.grad(lambda c: jnp.sum(lax.fori_loop(0, 5, body, c))), normal((3,)))
    add("fori_grad_closure",
        jax.grad(lambda w, c: jnp.sum(lax.fori_loop(1, 4, lambda i, v: jnp.tanh(w @ v), c)),
                 argnums=(0, 1)), normal((3, 3)), normal((3,)))
    add("fori_vmap", jax.vmap(lambda c: lax.fori_loop(0, 5, body, c)), normal((4, 3)))
    add("fori_vmap_traced_bound",
        jax.vmap(lambda n, c: lax.fori_loop(0, n, lambda i, v: v * 2.0 + 1.0, c)),
        np.array([0, 3, 1, 5], np.int32), normal((4,)))
    add("fori_jvp", lambda c, t: jax.jvp(lambda a: lax.fori_loop(0, 4, body, a), (c,), (t,)),
        normal((3,)), normal((3,)))

    # ---- while_loop ----
    def collatz_steps(n):
        def b(s):
            k, steps = s
            return jnp.where(k % 2 == 0, k // 2, 3 * k + 1), steps + 1
        return lax.while_loop(lambda s: s[0] > 1, b, (n, jnp.int32(0)))[1]

    add("while_int", collatz_steps, np.int32(27))
    add("while_vmap_pred", jax.vmap(collatz_steps), np.array([1, 6, 7, 27, 97], np.int32))

    def grow(x, limit):
        return lax.while_loop(lambda v: jnp.sum(v) < limit, lambda v: v * 1.5 + 0.1, x)

    add("while_float", grow, np.abs(normal((3,))), np.float32(20.0))
    add("while_vmap_carry", jax.vmap(grow, in_axes=(0, None)), np.abs(normal((4, 3))),
        np.float32(20.0))
    add("while_vmap_limit", jax.vmap(grow, in_axes=(None, 0)), np.abs(normal((3,))),
        np.array([1.0, 10.0, 50.0], np.float32))
    add("while_jvp", lambda x, t: jax.jvp(lambda a: grow(a, 20.0), (x,), (t,)),
        np.abs(normal((3,))), normal((3,)))
    add("while_vmap_vmap",
        jax.vmap(jax.vmap(lambda x, n: lax.while_loop(lambda s: s[1] < n,
                                                      lambda s: (s[0] * 2.0, s[1] + 1),
                                                      (x, jnp.int32(0)))[0]),
                 in_axes=(0, None)),
        normal((2, 3)), np.array([0, 2, 4], np.int32))

    # ---- cond and switch ----
    tf = lambda a, b: jnp.sin(a) * b
    ff = lambda a, b: a - b * b
    cond = lambda p, a, b: lax.cond(p, tf, ff, a, b)
    add("cond_true", cond, np.bool_(True), normal((3,)), normal((3,)))
    add("cond_false", cond, np.bool_(False), normal((3,)), normal((3,)))
    add("cond_vmap_pred", jax.vmap(cond), np.array([True, False, True, False]),
        normal((4, 3)), normal((4, 3)))
    add("cond_vmap_operand", jax.vmap(cond, in_axes=(None, 0, None)), np.bool_(False),
        normal((4, 3)), normal((3,)))
    add("cond_grad", jax.grad(lambda a, b, p: jnp.sum(cond(p, a, b)), argnums=(0, 1)),
        normal((3,)), normal((3,)), np.bool_(True))
    add("cond_grad_false", jax.grad(lambda a, b, p: jnp.sum(cond(p, a, b)), argnums=(0, 1)),
        normal((3,)), normal((3,)), np.bool_(False))
    add("cond_grad_data_pred",
        jax.grad(lambda a: jnp.sum(lax.cond(jnp.sum(a) > 0, jnp.exp, jnp.cos, a))),
        normal((4,)))
    add("cond_vmap_grad",
        jax.vmap(jax.grad(lambda a, b: jnp.sum(lax.cond(jnp.sum(a) > 0, tf, ff, a, b)))),
        normal((5, 3)), normal((5, 3)))
    add("cond_jvp",
        lambda a, b, ta: jax.jvp(lambda u: cond(jnp.sum(u) < 0, u, b), (a,), (ta,)),
        normal((3,)), normal((3,)), normal((3,)))
    add("cond_int_pred", lambda k, a: lax.cond(k, lambda v: v + 1.0, lambda v: v * 3.0, a),
        np.int32(2), normal((2,)))
    branches = [lambda a: a * 2.0, jnp.sin, lambda a: jnp.sum(a) + a]
    sw = lambda i, a: lax.switch(i, branches, a)
    add("switch", sw, np.int32(1), normal((3,)))
    add("switch_clamp_high", sw, np.int32(7), normal((3,)))
    add("switch_clamp_low", sw, np.int32(-2), normal((3,)))
    add("switch_vmap_index", jax.vmap(sw), np.array([0, 1, 2, 5, -1], np.int32),
        normal((5, 3)))
    add("switch_vmap_operand", jax.vmap(sw, in_axes=(None, 0)), np.int32(2), normal((4, 3)))
    add("switch_grad", jax.grad(lambda a, i: jnp.sum(sw(i, a) ** 2)), normal((3,)),
        np.int32(2))
    add("switch_vmap_grad", jax.vmap(jax.grad(lambda a, i: jnp.sum(sw(i, a) ** 2))),
        normal((3, 3)), np.array([0, 1, 2], np.int32))

    # ---- composed ----
    add("cond_in_scan_grad",
        jax.grad(lambda c, xs: jnp.sum(lax.scan(
            lambda c, x: (lax.cond(x > 0, lambda v: v * x, lambda v: jnp.sin(v), c), c),
            c, xs)[0])), normal((2,)), normal((5,)))
    add("scan_in_vmap_in_grad",
        jax.grad(lambda w, xs: jnp.sum(jax.vmap(
            lambda x: lax.scan(lambda c, xi: (c * w + xi, c), 0.0 * w, x)[0])(xs))),
        np.float32(0.9), normal((3, 4)))
    add("while_in_cond_vmap",
        jax.vmap(lambda p, x: lax.cond(
            p, lambda v: lax.while_loop(lambda u: u < 5.0, lambda u: u + 1.5, v),
            lambda v: -v, x)),
        np.array([True, False, True]), normal((3,)))
