"""pmap programs on 8 devices using every collective spmd has (psum, pmean, pmax, pmin,
all_gather, psum_scatter, all_to_all, ppermute, pshuffle, axis_index), with in_axes / out_axes
variants, axis_index_groups, nested maps and grad through pmap (cases_pmap.cpp is the spmd side).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

N = 8


def build(add):
    assert jax.device_count() >= N, "XLA_FLAGS must give 8 CPU devices"
    rng = np.random.default_rng(32000)

    def normal(shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    def pm(f, **kw):
        return jax.pmap(f, axis_name="i", **kw)

    x = normal((N, 3))
    xi = rng.integers(-20, 20, (N, 3)).astype(np.int32)
    halves = [[0, 1, 2, 3], [4, 5, 6, 7]]
    pairs = [[0, 4], [1, 5], [2, 6], [3, 7]]

    # ---- reductions ----
    add("psum", pm(lambda a: lax.psum(a, "i")), x)
    add("psum_int", pm(lambda a: lax.psum(a, "i")), xi)
    add("psum_bool", pm(lambda a: lax.psum(a > 0, "i")), xi)
    add("pmean", pm(lambda a: lax.pmean(a, "i")), x)
    add("pmax", pm(lambda a: lax.pmax(a, "i")), x)
    add("pmin", pm(lambda a: lax.pmin(a, "i")), x)
    add("pmax_int", pm(lambda a: lax.pmax(a, "i")), xi)
    add("psum_f64", pm(lambda a: lax.psum(a, "i")), normal((N, 2), np.float64))
    add("psum_scalar", pm(lambda a: lax.psum(jnp.sum(a), "i")), x)
    add("psum_groups_halves", pm(lambda a: lax.psum(a, "i", axis_index_groups=halves)), x)
    add("psum_groups_pairs", pm(lambda a: lax.psum(a, "i", axis_index_groups=pairs)), x)
    add("pmean_groups", pm(lambda a: lax.pmean(a, "i", axis_index_groups=pairs)), x)
    add("normalize", pm(lambda a: a / lax.psum(jnp.sum(jnp.abs(a)), "i")), x)

    # ---- data movement ----
    add("all_gather", pm(lambda a: lax.all_gather(a, "i")), x)
    add("all_gather_axis1", pm(lambda a: lax.all_gather(a, "i", axis=1)), normal((N, 2, 3)))
    add("all_gather_tiled", pm(lambda a: lax.all_gather(a, "i", tiled=True)), x)
    add("all_gather_tiled_axis1", pm(lambda a: lax.all_gather(a, "i", axis=1, tiled=True)),
        normal((N, 2, 3)))
    add("all_gather_int", pm(lambda a: lax.all_gather(a, "i")), xi)
    add("all_gather_groups",
        pm(lambda a: lax.all_gather(a, "i", axis_index_groups=halves)), x)
    add("psum_scatter", pm(lambda a: lax.psum_scatter(a, "i")), normal((N, N, 2)))
    add("psum_scatter_tiled", pm(lambda a: lax.psum_scatter(a, "i", tiled=True)),
        normal((N, 16)))
    add("psum_scatter_dim1",
        pm(lambda a: lax.psum_scatter(a, "i", scatter_dimension=1, tiled=True)),
        normal((N, 2, 8)))
    add("all_to_all", pm(lambda a: lax.all_to_all(a, "i", 0, 0)), normal((N, N, 2)))
    add("all_to_all_concat1", pm(lambda a: lax.all_to_all(a, "i", 0, 1)), normal((N, N, 2)))
    add("all_to_all_tiled", pm(lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True)),
        normal((N, 2, 16)))
    ring = [(k, (k + 1) % N) for k in range(N)]
    add("ppermute_ring", pm(lambda a: lax.ppermute(a, "i", ring)), x)
    add("ppermute_partial", pm(lambda a: lax.ppermute(a, "i", [(0, 3), (3, 0), (5, 6)])), x)
    add("ppermute_int", pm(lambda a: lax.ppermute(a, "i", ring)), xi)
    perm = [3, 1, 7, 0, 2, 6, 5, 4]
    add("pshuffle", pm(lambda a: lax.pshuffle(a, "i", perm)), x)
    add("axis_index", pm(lambda a: a * lax.axis_index("i")), xi)
    add("axis_index_float",
        pm(lambda a: a + lax.axis_index("i").astype(jnp.float32) * 10.0), x)
    add("halo_stencil",
        pm(lambda a: a * -2.0
           + lax.ppermute(a, "i", [(k, (k + 1) % N) for k in range(N)])
           + lax.ppermute(a, "i", [((k + 1) % N, k) for k in range(N)])), normal((N, 4)))

    # ---- in_axes / out_axes ----
    add("in_axes_none", pm(lambda a, b: a * b + lax.psum(a, "i"), in_axes=(0, None)), x,
        normal((3,)))
    add("in_axes_1", pm(lambda a: lax.psum(a, "i") * a, in_axes=1), normal((3, N)))
    add("out_axes_1", pm(lambda a: jnp.sin(a), out_axes=1), normal((N, 2, 3)))
    add("in_1_out_1", pm(lambda a, b: a @ b, in_axes=(1, 0), out_axes=1), normal((2, N, 3)),
        normal((N, 3, 4)))
    add("tuple_out", pm(lambda a: (lax.pmax(a, "i"), jnp.sum(a))), x)
    add("dict_in", lambda a, b: pm(lambda d: d["a"] * lax.psum(d["b"], "i"))({"a": a, "b": b}),
        x, normal((N, 3)))

    # ---- composed with other transformations ----
    add("pmap_vmap_psum",
        pm(jax.vmap(lambda a: lax.psum(a, ("i", "j")), axis_name="j")), normal((N, 2, 3)))
    add("pmap_vmap_dot", pm(jax.vmap(jnp.dot)), normal((N, 2, 3)), normal((N, 2, 3)))
    add("pmap_of_jit", pm(jax.jit(lambda a: lax.psum(jnp.tanh(a), "i"))), x)
    add("pmap_scan",
        pm(lambda a: lax.scan(lambda c, v: (lax.psum(c * v, "i"), c), jnp.float32(1.0), a)[0]),
        normal((N, 4)) * 0.3)
    add("pmap_cond_axis_index",
        pm(lambda a: lax.cond(lax.axis_index("i") % 2 == 0, jnp.sin, jnp.cos, a)), x)
    # Nested pmap is left out: JAX 0.10's pmap (over shard_map) refuses a pmap inside another.

    # ---- grad through pmap ----
    def loss(w, xb):
        return jnp.sum(jnp.tanh(xb @ w) ** 2)

    w, xb = normal((3, 2)), normal((N, 4, 3))
    add("grad_pmean_step",
        pm(lambda w, b: lax.pmean(jax.grad(loss)(w, b), "i"), in_axes=(None, 0)), w, xb)
    add("value_and_grad_psum",
        pm(lambda w, b: (lambda vg: (lax.psum(vg[0], "i"), lax.psum(vg[1], "i")))(
            jax.value_and_grad(loss)(w, b)), in_axes=(None, 0)), w, xb)
    add("grad_of_pmap",
        jax.grad(lambda w, b: jnp.sum(pm(loss, in_axes=(None, 0))(w, b))), w, xb)
    add("grad_of_pmap_psum",
        jax.grad(lambda a: jnp.sum(pm(lambda v: lax.psum(v * v, "i") * v)(a))), x)
    add("grad_of_pmap_all_gather",
        jax.grad(lambda a: jnp.sum(pm(lambda v: jnp.sin(lax.all_gather(v, "i")) * v[0])(a))),
        x)
    add("grad_of_pmap_ppermute",
        jax.grad(lambda a, c: jnp.sum(pm(lambda v, u: lax.ppermute(v, "i", ring) * u)(a, c))),
        x, normal((N, 3)))
    add("vmap_of_pmap",
        jax.vmap(pm(lambda a: lax.psum(a, "i") * a), in_axes=1, out_axes=1), normal((N, 2, 3)))
