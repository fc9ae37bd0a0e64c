"""Elementwise ops in every dtype spmd has, special values included (cases_elementwise.cpp).

Case names are <op>_<dtype>: the op lists (UNARY, BINARY) and which dtypes each runs in are
mirrored by the C++ side; every case's inputs are the dtype's standard inputs below.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

B, I32, I64, U32 = "b", "i32", "i64", "u32"
F16, BF16, F32, F64, C64, C128 = "f16", "bf16", "f32", "f64", "c64", "c128"
DT = {B: jnp.bool_, I32: jnp.int32, I64: jnp.int64, U32: jnp.uint32, F16: jnp.float16,
      BF16: jnp.bfloat16, F32: jnp.float32, F64: jnp.float64, C64: jnp.complex64,
      C128: jnp.complex128}
FLOATS = [F16, BF16, F32, F64]
COMPLEX = [C64, C128]
INEXACT = FLOATS + COMPLEX
INTS = [I32, I64, U32]
REAL = INTS + FLOATS
NUMERIC = REAL + COMPLEX
ALL = [B] + NUMERIC

# Floats: signed zeros, infinities, NaN, tiny and large values, halves (rounding), ordinary ones.
FLOAT_X = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -7.25, 1e-3, 100.0, 1e4,
           np.inf, -np.inf, np.nan, 0.3, -0.7, 12.0]
FLOAT_Y = [1.0, -3.0, 0.25, 2.0, -0.0, 0.0, 2.0, -1.5, 3.0, -1.0, 2.5, 0.5, np.inf, 1e-4,
           2.0, np.nan, 1.0, -0.3, 0.7, -5.0]
INT_X = [0, 1, -1, 7, -7, 13, -13, 100, 2, -2, 5, -5, 3, 31, -31, 1000, 2147483647, -2147483648,
         6, -6]
INT_Y = [1, 2, 3, 2, -2, 5, -5, -7, 1, 1, 2, 3, 3, 4, 4, -3, 3, 3, -4, 4]
UINT_X = [0, 1, 7, 13, 100, 255, 1000, 4294967295, 2147483648, 6, 3, 12, 5, 9, 31, 64, 77, 2, 4,
          11]
UINT_Y = [1, 2, 3, 2, 7, 5, 9, 2, 3, 4, 1, 5, 2, 3, 4, 8, 10, 6, 3, 5]
BOOL_X = [True, False, True, False] * 5
BOOL_Y = [True, True, False, False] * 5
COMPLEX_X = [0, 1, -1, 1j, -1j, 0.5 + 0.5j, -2.5 + 1j, 3 - 4j, 0.1 - 0.2j, -1 - 1j, 2 + 0.5j,
             -0.3 + 2j, 1.5 - 1.5j, 4 + 3j, -4 - 3j, 0.25j, -0.7, 1 + 1j, 2 - 2j, -0.5 + 0.1j]
COMPLEX_Y = [1, 2j, -1 + 1j, 0.5, 3 - 1j, 1 + 1j, -2, 0.25 - 0.5j, 1j, 2 + 2j, -1j, 0.5 + 2j,
             3, -1 - 2j, 1.5, 2, 1 - 1j, -0.5j, 0.3 + 0.4j, 4]


def inputs(dt):
    t = DT[dt]
    if dt == B:
        return np.array(BOOL_X), np.array(BOOL_Y)
    if dt == U32:
        return np.array(UINT_X, np.uint32), np.array(UINT_Y, np.uint32)
    if dt in (I32, I64):
        return np.array(INT_X, np.dtype(t)), np.array(INT_Y, np.dtype(t))
    if dt in COMPLEX:
        return np.array(COMPLEX_X, np.dtype(t)), np.array(COMPLEX_Y, np.dtype(t))
    return jnp.asarray(FLOAT_X, t), jnp.asarray(FLOAT_Y, t)


def moderate(dt):
    """Finite values of moderate size, for ops whose large arguments are ill-conditioned."""
    x = np.array([-3.0, -1.7, -1.0, -0.5, -0.1, -0.0, 0.0, 0.05, 0.3, 0.7, 1.0, 1.3, 2.0, 2.9,
                  np.inf, -np.inf, np.nan], np.float64)
    return jnp.asarray(x, DT[dt])


def unit(dt):
    """Inputs of erf_inv: (-1, 1) and its ends."""
    return jnp.asarray([-1.0, -0.99, -0.5, -0.1, 0.0, 0.2, 0.7, 0.95, 1.0, 1.5], DT[dt])


UNARY = {
    # name: (fn, dtypes, input kind)
    "negative": (jnp.negative, [I32, I64, U32] + INEXACT, "x"),
    "abs": (jnp.abs, REAL + COMPLEX, "x"),
    "sign": (jnp.sign, NUMERIC, "x"),
    "square": (jnp.square, NUMERIC, "x"),
    "exp": (jnp.exp, [B, I32, U32] + INEXACT, "m"),
    "log": (jnp.log, [I32] + INEXACT, "x"),
    "log1p": (jnp.log1p, INEXACT, "x"),
    "expm1": (jnp.expm1, INEXACT, "m"),
    "sqrt": (jnp.sqrt, [I32, U32] + INEXACT, "x"),
    "rsqrt": (lax.rsqrt, INEXACT, "x"),
    "tanh": (jnp.tanh, [I32] + INEXACT, "x"),
    "logistic": (jax.nn.sigmoid, INEXACT, "x"),
    "sin": (jnp.sin, [I32] + INEXACT, "m"),
    "cos": (jnp.cos, [I32] + INEXACT, "m"),
    "floor": (jnp.floor, REAL, "x"),
    "ceil": (jnp.ceil, REAL, "x"),
    "round": (jnp.round, REAL + COMPLEX, "x"),
    "erf": (jax.scipy.special.erf, [I32] + FLOATS, "x"),
    "erf_inv": (jax.scipy.special.erfinv, FLOATS, "u"),
    "isfinite": (jnp.isfinite, ALL, "x"),
    "reciprocal": (jnp.reciprocal, INEXACT, "x"),
    "real": (jnp.real, NUMERIC, "x"),
    "imag": (jnp.imag, NUMERIC, "x"),
    "conj": (jnp.conj, NUMERIC, "x"),
    "angle": (jnp.angle, REAL + COMPLEX, "x"),
    "logical_not": (jnp.logical_not, ALL, "x"),
    "astype_f32": (lambda a: jnp.asarray(a).astype(jnp.float32), ALL[:-2], "x"),
    "astype_i32": (lambda a: jnp.asarray(a).astype(jnp.int32), [B, I64, U32], "x"),
    "astype_bool": (lambda a: jnp.asarray(a).astype(jnp.bool_), NUMERIC, "x"),
    "astype_c128": (lambda a: jnp.asarray(a).astype(jnp.complex128), NUMERIC, "x"),
    "astype_f16": (lambda a: jnp.asarray(a).astype(jnp.float16), [B, I32, F32, F64, BF16], "x"),
    "astype_bf16": (lambda a: jnp.asarray(a).astype(jnp.bfloat16), [B, I32, F32, F64, F16], "x"),
    # jax.nn activations, float types
    "relu": (jax.nn.relu, FLOATS, "x"),
    "gelu_tanh": (lambda a: jax.nn.gelu(a, approximate=True), FLOATS, "m"),
    "gelu_erf": (lambda a: jax.nn.gelu(a, approximate=False), FLOATS, "m"),
    "softplus": (jax.nn.softplus, FLOATS, "x"),
    "log_sigmoid": (jax.nn.log_sigmoid, FLOATS, "x"),
    "silu": (jax.nn.silu, FLOATS, "m"),
    "elu": (jax.nn.elu, FLOATS, "m"),
    "selu": (jax.nn.selu, FLOATS, "m"),
    "celu": (jax.nn.celu, FLOATS, "m"),
    "leaky_relu": (jax.nn.leaky_relu, FLOATS, "x"),
    "relu6": (jax.nn.relu6, FLOATS, "x"),
    "hard_tanh": (jax.nn.hard_tanh, FLOATS, "x"),
    "soft_sign": (jax.nn.soft_sign, FLOATS, "x"),
    "hard_sigmoid": (jax.nn.hard_sigmoid, FLOATS, "x"),
}


def bitwise_ok(dt):
    return dt in [B] + INTS


BINARY = {
    "add": (jnp.add, ALL),
    "subtract": (jnp.subtract, NUMERIC),
    "multiply": (jnp.multiply, ALL),
    "divide": (jnp.divide, [I32] + INEXACT),
    "floor_divide": (jnp.floor_divide, REAL),
    "remainder": (jnp.remainder, REAL),
    "power": (jnp.power, [F16, BF16, F32, F64] + COMPLEX),
    "maximum": (jnp.maximum, [B] + REAL),
    "minimum": (jnp.minimum, [B] + REAL),
    "arctan2": (jnp.arctan2, FLOATS),
    "equal": (jnp.equal, ALL),
    "not_equal": (jnp.not_equal, ALL),
    "less": (jnp.less, [B] + REAL),
    "less_equal": (jnp.less_equal, [B] + REAL),
    "greater": (jnp.greater, [B] + REAL),
    "greater_equal": (jnp.greater_equal, [B] + REAL),
    "logical_and": (jnp.logical_and, ALL),
    "logical_or": (jnp.logical_or, ALL),
    "logical_xor": (jnp.logical_xor, ALL),
    "bitwise_and": (jnp.bitwise_and, [B] + INTS),
    "bitwise_or": (jnp.bitwise_or, [B] + INTS),
    "bitwise_xor": (jnp.bitwise_xor, [B] + INTS),
}


def build(add):
    for name, (fn, dts, kind) in UNARY.items():
        for dt in dts:
            if kind == "m" and dt in [B] + INTS:
                x = inputs(dt)[0] if dt == B else np.arange(-5, 15).astype(np.dtype(DT[dt]))
            elif kind == "m" and dt in FLOATS:
                x = moderate(dt)
            elif kind == "u":
                x = unit(dt)
            else:
                x = inputs(dt)[0]
            add(f"{name}_{dt}", fn, x)
    for name, (fn, dts) in BINARY.items():
        for dt in dts:
            x, y = inputs(dt)
            add(f"{name}_{dt}", fn, x, y)

    # where / select with a bool condition; clip to [min(y, 0.5), max(y, 0.5)] (both sides)
    cond = np.array(BOOL_Y) ^ np.array([True, False, False, True, False] * 4)
    for dt in ALL:
        x, y = inputs(dt)
        add(f"where_{dt}", jnp.where, cond, x, y)
        add(f"select_{dt}", lax.select, cond, x, y)
    for dt in REAL:
        x, y = inputs(dt)
        lo, hi = (jnp.minimum(y, x[3]), jnp.maximum(y, x[3]))
        add(f"clip_{dt}", jnp.clip, x, lo, hi)

    # Integer powers: exponents 0..4 (negative integer exponents are an error in jnp).
    for dt in [I32, I64, U32]:
        base = np.array([0, 1, 2, 3, 5, 7, 10, 2, 3, 12], np.dtype(DT[dt]))
        if dt != U32:
            base = base * np.array([1, -1] * 5, np.dtype(DT[dt]))
        expo = np.array([0, 1, 2, 3, 4, 4, 3, 2, 1, 0], np.dtype(DT[dt]))
        add(f"power_{dt}", jnp.power, base, expo)
    # Real powers of negative bases (NaN), of zero (inf), fractional exponents.
    add("power_special_f64", jnp.power,
        np.array([-2.0, -2.0, 0.0, 0.0, -0.0, 2.0, np.inf, 1.0, np.nan, 1.0, 4.0, 0.5]),
        np.array([0.5, 3.0, -1.0, 0.0, -3.0, -np.inf, 0.5, np.nan, 0.0, np.inf, -0.5, 0.5]))
    # Integer division by zero and INT_MIN / -1: XLA's defined results.
    for dt in [I32, I64]:
        t = np.dtype(DT[dt])
        lo = np.iinfo(t).min
        a = np.array([7, -7, 0, lo, lo, 5, -5, 9], t)
        b = np.array([0, 0, 0, -1, 1, 3, -3, -4], t)
        add(f"floor_divide_edge_{dt}", jnp.floor_divide, a, b)
        add(f"remainder_edge_{dt}", jnp.remainder, a, b)
    a = np.array([7, 0, 4294967295, 5], np.uint32)
    b = np.array([0, 0, 7, 3], np.uint32)
    add("floor_divide_edge_u32", jnp.floor_divide, a, b)
    add("remainder_edge_u32", jnp.remainder, a, b)
    # Float floor_divide and remainder with signs, zeros and infinities.
    fa = np.array([7.5, -7.5, 7.5, -7.5, 1.0, -1.0, 0.0, np.inf, 3.0, -0.0, 5.0, 2.0])
    fb = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 3.0, 2.0, np.inf, 1.0, -np.inf, np.nan])
    for dt in [F32, F64]:
        t = np.dtype(DT[dt])
        add(f"floor_divide_edge_{dt}", jnp.floor_divide, fa.astype(t), fb.astype(t))
        add(f"remainder_edge_{dt}", jnp.remainder, fa.astype(t), fb.astype(t))

    # Shifts (lax): counts 0..31 and past the width (XLA: 0 for shifts of >= 32 bits).
    for dt in [I32, U32, I64]:
        t = np.dtype(DT[dt])
        x = np.array([1, 3, 255, 1000, 12345, 7, 1, 2, 9, 77], t)
        if dt != U32:
            x = x * np.array([1, -1] * 5, t)
        s = np.array([0, 1, 4, 7, 31, 2, 30, 33, 3, 16], t)
        add(f"shift_left_{dt}", lax.shift_left, x, s)
        add(f"shift_right_logical_{dt}", lax.shift_right_logical, x, s)

    # Broadcasting: (3, 1) with (4,), a scalar array with (2, 3).
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 1)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    add("broadcast_add_f32", jnp.add, a, b)
    add("broadcast_mul_f64", jnp.multiply, a.astype(np.float64), b.astype(np.float64))
    add("broadcast_scalar_i32", jnp.subtract, np.array(5, np.int32),
        np.arange(6, dtype=np.int32).reshape(2, 3))
    add("broadcast_where_f32", lambda c, x, y: jnp.where(c, x, y),
        np.array([[True], [False], [True]]), a, b)
    # Weak Python scalars keep the array's dtype.
    for dt in [I32, U32, F16, BF16, F32, C64]:
        x = inputs(dt)[0]
        add(f"weak_mul_{dt}", lambda v: jnp.asarray(v) * 3, x)
    for dt in [F16, BF16, F32, F64, C64]:
        x = inputs(dt)[0]
        add(f"weak_fmul_{dt}", lambda v: jnp.asarray(v) * 0.1, x)
        add(f"weak_rsub_{dt}", lambda v: 2.5 - jnp.asarray(v), x)
    # Large and small magnitudes: overflow to inf, underflow to 0, subnormals.
    big = np.array([1e30, -1e30, 3e38, 1e-30, 1e-40, -1e-44, 80.0, 89.0, -104.0, 88.7])
    add("exp_big_f32", jnp.exp, big.astype(np.float32))
    add("mul_big_f32", lambda v: v * v, jnp.asarray(big, jnp.float32))
    add("log_small_f32", jnp.log, np.abs(big[big != 1e-40][np.abs(big[big != 1e-40]) > 1e-40])
        .astype(np.float32))
    # XLA:CPU flushes float32 subnormals to zero (inputs and results); spmd keeps them (deviations).
    add("log_subnormal_f32", jnp.log, np.array([1e-40, 1e-44, 1e-38], np.float32))
    add("astype_bf16_subnormal", lambda v: jnp.asarray(v).astype(jnp.bfloat16),
        np.array([1e-40, -3e-39, 1.0]))
    add("exp_big_f64", jnp.exp, np.array([700.0, 710.0, -745.0, -746.0, 1e-320, 0.0]))
    add("sqrt_small_f64", jnp.sqrt, np.array([1e-320, 5e-324, 1e300, 4.0]))
    h = np.array([65504.0, 65520.0, 6e-8, 1e-8, 60000.0, -70000.0])
    add("astype_f16_edge", lambda v: jnp.asarray(v).astype(jnp.float16), h)
    add("astype_bf16_edge", lambda v: jnp.asarray(v).astype(jnp.bfloat16),
        np.array([3.4e38, 3.5e38, 1.00390625, 1.01171875, 1e-30, -2.0]))
    add("add_f16_overflow", jnp.add, np.array([65504.0, 60000.0, -65504.0], np.float16),
        np.array([32.0, 10000.0, -32.0], np.float16))
    # float -> int conversion (in range) and int -> float rounding
    add("astype_f32_to_i32", lambda v: jnp.asarray(v).astype(jnp.int32),
        np.array([1.7, -1.7, 0.5, -0.5, 100.9, -3.0], np.float32))
    add("astype_i64_to_f32", lambda v: jnp.asarray(v).astype(jnp.float32),
        np.array([16777217, -16777217, 2**40 + 1, 3], np.int64))
