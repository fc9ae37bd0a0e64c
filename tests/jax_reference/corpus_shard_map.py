"""shard_map programs on a 2x4 mesh (axes "x", "y") using the collectives over one axis and
over both (cases_shard_map.cpp is the spmd side)."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P


def build(add):
    rng = np.random.default_rng(320000)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))

    def normal(shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    def sm(f, in_specs, out_specs, **kw):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)

    x = normal((4, 8))          # P("x", "y") blocks of (2, 2)
    xi = rng.integers(-9, 9, (4, 8)).astype(np.int32)
    both = ("x", "y")

    # ---- reductions over one axis and both ----
    add("psum_y", sm(lambda a: lax.psum(a, "y"), P("x", "y"), P("x", None)), x)
    add("psum_x", sm(lambda a: lax.psum(a, "x"), P("x", "y"), P(None, "y")), x)
    add("psum_xy", sm(lambda a: lax.psum(a, both), P("x", "y"), P()), x)
    add("psum_xy_int", sm(lambda a: lax.psum(a, both), P("x", "y"), P()), xi)
    add("pmean_xy", sm(lambda a: lax.pmean(a, both), P("x", "y"), P()), x)
    add("pmax_y", sm(lambda a: lax.pmax(a, "y"), P("x", "y"), P("x", None)), x)
    add("pmin_x", sm(lambda a: lax.pmin(a, "x"), P("x", "y"), P(None, "y")), x)
    add("pmax_xy_scalar",
        sm(lambda a: lax.pmax(jnp.max(a), both).reshape(1), P("x", "y"), P()), x)
    add("psum_yx_order", sm(lambda a: lax.psum(a, ("y", "x")), P("x", "y"), P()), x)

    # ---- data movement ----
    # JAX 0.10's all_gather leaves its result varying over the axis for the replication check
    # (all_gather_invariant is the invariant one); spmd's all_gather is invariant, as the
    # values are: check_vma=False lets JAX take the replicated out_specs.
    add("all_gather_y", sm(lambda a: lax.all_gather(a, "y", axis=1, tiled=True),
                           P("x", "y"), P("x", None), check_vma=False), x)
    add("all_gather_x_untiled",
        sm(lambda a: lax.all_gather(a, "x"), P("x", "y"), P(None, None, "y"), check_vma=False),
        x)
    add("all_gather_xy",
        sm(lambda a: lax.all_gather(a, both, tiled=True), P(both), P(), check_vma=False),
        normal((16, 2)))
    add("ppermute_y",
        sm(lambda a: lax.ppermute(a, "y", [(k, (k + 1) % 4) for k in range(4)]),
           P("x", "y"), P("x", "y")), x)
    add("ppermute_x", sm(lambda a: lax.ppermute(a, "x", [(0, 1), (1, 0)]),
                         P("x", "y"), P("x", "y")), x)
    add("axis_index_x",
        sm(lambda a: a + lax.axis_index("x").astype(a.dtype), P("x", "y"), P("x", "y")), x)
    add("axis_index_y",
        sm(lambda a: a * lax.axis_index("y"), P("x", "y"), P("x", "y")), xi)
    add("axis_index_xy",
        sm(lambda a: a * 0 + lax.axis_index(both), P("x", "y"), P("x", "y")), xi)
    add("psum_scatter_y",
        sm(lambda a: lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True),
           P("x", None), P("x", "y")), x)
    add("psum_scatter_x_untiled",
        sm(lambda a: lax.psum_scatter(a, "x"), P(None, "y"), P(both)),
        normal((2, 8)))
    add("all_to_all_y",
        sm(lambda a: lax.all_to_all(a, "y", 0, 1, tiled=True), P("x", "y"), P("x", "y")),
        normal((8, 8)))

    # ---- programs ----
    add("matmul_tensor_parallel",
        sm(lambda a, w: lax.psum(a @ w, "y"), (P("x", "y"), P("y", None)), P("x", None)),
        normal((4, 8)), normal((8, 3)))
    add("layernorm_rows",
        sm(lambda a: (a - lax.pmean(jnp.mean(a, axis=1, keepdims=True), "y"))
           / jnp.sqrt(lax.pmean(jnp.mean(a * a, axis=1, keepdims=True), "y") + 1e-5),
           P("x", "y"), P("x", "y")), x)
    add("mixed_specs",
        sm(lambda a, b: a * lax.psum(jnp.sum(b), "x"), (P("x", "y"), P("x")), P("x", "y")),
        x, normal((2, 3)))
    add("spec_multi_axis",
        sm(lambda a: a * 2.0 + lax.axis_index(both).astype(a.dtype), P(both, None),
           P(both, None)), normal((8, 3)))
    add("jit_shard_map",
        jax.jit(sm(lambda a: lax.psum(jnp.sin(a), "x"), P("x", "y"), P(None, "y"))), x)

    # ---- grad through shard_map ----
    def tp_loss(a, w):
        y = sm(lambda a, w: lax.psum(a @ w, "y"), (P("x", "y"), P("y", None)), P("x", None))(a, w)
        return jnp.sum(jnp.tanh(y) ** 2)

    add("grad_tensor_parallel", jax.grad(tp_loss, argnums=(0, 1)), normal((4, 8)),
        normal((8, 3)))
    add("grad_psum_xy",
        jax.grad(lambda a: jnp.sum(sm(lambda b: lax.psum(b * b, both), P("x", "y"), P())(a))),
        x)
    add("grad_ppermute",
        jax.grad(lambda a: jnp.sum(sm(lambda b: lax.ppermute(b, "y", [(0, 1), (1, 2), (2, 3),
                                                                      (3, 0)]) * b,
                                      P("x", "y"), P("x", "y"))(a) ** 2)), x)
    # grad inside the body (check_vma=True, the default): w, replicated (P()), is invariant;
    # using it with the varying b inserts a pvary whose transpose is a psum, so grad(w) is the
    # sum of the devices' gradients. check_vma=False gives each device its own.
    inner = lambda w, b: lax.pmean(jax.grad(lambda w: jnp.sum(jnp.tanh(b @ w)))(w), both)
    w, b = normal((3, 2)), normal((16, 3))
    add("grad_inside", sm(inner, (P(), P(both)), P()), w, b)
    add("grad_inside_no_vma", sm(inner, (P(), P(both)), P(), check_vma=False), w, b)
    # The same, every device's result stacked (its own value, not a mean).
    each = lambda f: (lambda *a: f(*a)[None])
    tanh_loss = lambda w, b: jnp.sum(jnp.tanh(b @ w))
    add("grad_inside_each", sm(each(lambda w, b: jax.grad(tanh_loss)(w, b)), (P(), P(both)),
                               P(both)), w, b)
    # A loss already psum'd: psum's transpose is a pvary (no second sum); w's pvary still sums.
    add("grad_inside_psum_loss",
        sm(each(lambda w, b: jax.grad(lambda w: lax.psum(tanh_loss(w, b), both))(w)),
           (P(), P(both)), P(both)), w, b)
    # w varies over "x", not "y": its cotangent is summed over "y" only.
    add("grad_inside_vary_x", sm(each(lambda w, b: jax.grad(tanh_loss)(w, b)), (P("x"), P(both)),
                                 P(both)), normal((6, 2)), b)
    # w.r.t. a varying argument: each device's own gradient; through a psum'd loss, no extra sum.
    add("grad_inside_varying_arg",
        sm(lambda w, b: jax.grad(tanh_loss, argnums=1)(w, b), (P(), P(both)), P(both)), w, b)
    add("grad_inside_psum_varying",
        sm(lambda a: jax.grad(lambda a: lax.psum(jnp.sum(a * a), both))(a), P("x", "y"),
           P("x", "y")), x)
    add("value_and_grad_inside",
        sm(each(lambda w, b: jnp.concatenate([
            jnp.ravel(v) for v in jax.value_and_grad(tanh_loss)(w, b)])), (P(), P(both)),
           P(both)), w, b)
    # vmap of grad inside the body: every example's cotangent summed over the mesh.
    add("vmap_grad_inside",
        sm(each(lambda ws, b: jax.vmap(lambda w: jax.grad(tanh_loss)(w, b))(ws)),
           (P(), P(both)), P(both)), normal((2, 3, 2)), b)
    # grad of a scan inside the body.
    def scan_loss(w, b):
        def step(h, r):
            h = jnp.tanh(r @ w + h)
            return h, jnp.sum(h)
        # (JAX wants the carry varying as the loop makes it; spmd needs no cast.)
        h0 = lax.pcast(jnp.zeros(2, w.dtype), both, to="varying")
        h, ys = lax.scan(step, h0, b)
        return jnp.sum(ys) + jnp.sum(h)
    add("grad_scan_inside", sm(each(lambda w, b: jax.grad(scan_loss)(w, b)), (P(), P(both)),
                               P(both)), w, b)
    # jvp inside the body is unaffected: the tangents just vary.
    add("jvp_inside",
        sm(lambda w, b, t: jax.jvp(lambda w: jnp.tanh(b @ w), (w,), (t,))[1], (P(), P(both), P()),
           P(both)), w, b, normal((3, 2)))
