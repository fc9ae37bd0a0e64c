#!/usr/bin/env python3
"""Prints the equations' primitive names of jax.make_jaxpr for the common batched ops, one line
per program ("name: prim prim ..."), as tests/jax_reference/data/jaxpr_shapes.txt holds them.
Calls of nested jaxprs that only wrap code (pjit, closed_call, custom_jvp_call, ...) are inlined,
so the line lists the primitives that do the work. cases_jaxpr_shapes.cpp compares spmd's
make_jaxpr with these lines.

    build/venv/bin/python tests/jax_reference/jaxpr_shapes.py > tests/jax_reference/data/jaxpr_shapes.txt
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

WRAPPERS = {"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
            "remat", "checkpoint"}


def primitives(jaxpr):
    names = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
        if name in WRAPPERS and inner is not None:
            names.extend(primitives(getattr(inner, "jaxpr", inner)))
        else:
            names.append(name)
    return names


def f32(*shape):
    return np.zeros(shape, np.float32)


def i32(*shape):
    return np.zeros(shape, np.int32)


CASES = [
    ("vmap_vmap_vdot", jax.vmap(jax.vmap(jnp.vdot)), (f32(2, 3, 4), f32(2, 3, 4))),
    ("vmap_vdot", jax.vmap(jnp.vdot), (f32(3, 4), f32(3, 4))),
    ("vmap_matmul_lhs", jax.vmap(jnp.matmul, in_axes=(0, None)), (f32(4, 2, 3), f32(3, 5))),
    ("vmap_matmul_rhs", jax.vmap(jnp.matmul, in_axes=(None, 0)), (f32(2, 3), f32(4, 3, 5))),
    ("vmap_matmul_both", jax.vmap(jnp.matmul), (f32(4, 2, 3), f32(4, 3, 5))),
    ("vmap_conv_lhs",
     jax.vmap(lambda l, r: lax.conv_general_dilated(l, r, (1, 1), "SAME"), in_axes=(0, None)),
     (f32(3, 2, 2, 5, 5), f32(4, 2, 3, 3))),
    ("vmap_conv_both",
     jax.vmap(lambda l, r: lax.conv_general_dilated(l, r, (1, 1), "SAME")),
     (f32(3, 2, 2, 5, 5), f32(3, 4, 2, 3, 3))),
    ("vmap_sum_axis0", jax.vmap(lambda a: jnp.sum(a, axis=0)), (f32(4, 3, 5),)),
    ("vmap_max_axis1", jax.vmap(lambda a: jnp.max(a, axis=1)), (f32(4, 3, 5),)),
    ("vmap_take", jax.vmap(lambda a, i: jnp.take(a, i, axis=0, mode="clip")),
     (f32(4, 6, 3), i32(4, 2))),
    ("vmap_take_operand", jax.vmap(lambda a, i: jnp.take(a, i, axis=0, mode="clip"),
                                   in_axes=(0, None)), (f32(4, 6, 3), i32(2))),
    ("vmap_dynamic_slice", jax.vmap(lambda a, i: lax.dynamic_slice(a, (i,), (2,))),
     (f32(4, 6), i32(4))),
]


def main():
    for name, f, args in CASES:
        print(f"{name}: {' '.join(primitives(jax.make_jaxpr(f)(*args).jaxpr))}")


if __name__ == "__main__":
    main()
