"""jnp's type promotion over every pair of spmd's dtypes, and with weak Python scalars
(cases_promotion.cpp). Each case returns a + b of two tiny arrays (or of an array and a Python
int, float or complex): the output's dtype is JAX's promote_types table restricted to spmd's
dtypes (the reference test always checks it), the values that a + b holds.
"""
import jax.numpy as jnp
import numpy as np

DTYPES = {"b": jnp.bool_, "i32": jnp.int32, "i64": jnp.int64, "u32": jnp.uint32,
          "f16": jnp.float16, "bf16": jnp.bfloat16, "f32": jnp.float32, "f64": jnp.float64,
          "c64": jnp.complex64, "c128": jnp.complex128}
WEAK = {"int": 2, "float": 2.5, "complex": 1 + 2j}


def value(name):
    if name == "b":
        return np.array([True, False])
    return jnp.asarray([1, 3], DTYPES[name])


def build(add):
    for a in DTYPES:
        for b in DTYPES:
            add(f"promote_{a}_{b}", lambda x, y: jnp.asarray(x) + jnp.asarray(y), value(a),
                value(b))
    for a in DTYPES:
        for w, s in WEAK.items():
            add(f"promote_{a}_{w}", lambda x, s=s: jnp.asarray(x) + s, value(a))
            add(f"promote_{w}_{a}_mul", lambda x, s=s: s * jnp.asarray(x), value(a))
    # jnp.promote_types itself, as a table of codes (index into DTYPES' order).
    names = list(DTYPES)
    table = np.array([[names.index(next(k for k, v in DTYPES.items()
                                         if jnp.dtype(v) == jnp.promote_types(DTYPES[a],
                                                                              DTYPES[b])))
                       for b in names] for a in names], np.int32)
    add("promote_types_table", lambda: table)
