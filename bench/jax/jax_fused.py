"""JAX counterpart of bench_fused: layer norm over the last axis (eps 1e-5, gain and bias) then
the tanh-approximated GELU (jax.nn.gelu(approximate=True)), on (8192, 1024) float32, under
jax.jit as a JAX user writes it; XLA fuses it. The inputs are bench_fused's formulas; the output
is checked against NumPy in float64. Median of 11 runs after two warm-up calls (layernorm_gelu).
"""
from jax_timing import check, jax, jnp, median_ms, np, report, start


def layer_norm_gelu(x, gain, bias):
    mu = jnp.mean(x, -1, keepdims=True)
    xc = x - mu
    var = jnp.mean(xc * xc, -1, keepdims=True)
    return jax.nn.gelu(xc * jax.lax.rsqrt(var + 1e-5) * gain + bias, approximate=True)


def main():
    args = start(rows=8192, cols=1024, reps=11)
    i, j = np.meshgrid(np.arange(args.rows), np.arange(args.cols), indexing="ij")
    x = ((i * 131 + j * 71) % 1000).astype(np.float32) / 250.0 - 2.0
    jj = np.arange(args.cols)
    gain = (1.0 + (jj % 7) * 0.125).astype(np.float32)
    bias = ((jj % 5) * 0.25 - 0.5).astype(np.float32)
    xd = x.astype(np.float64)
    v = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * gain + bias
    want = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    f = jax.jit(layer_norm_gelu)
    args_d = [jnp.asarray(a) for a in (x, gain, bias)]
    check("layer_norm -> gelu", f(*args_d), want, 1e-4, 1e-5)
    report("layernorm_gelu", median_ms(lambda: f(*args_d), args.reps, warmup=2))


if __name__ == "__main__":
    main()
