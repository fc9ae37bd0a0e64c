"""JAX counterpart of bench_fft: jnp.fft under jax.jit on bench_fft's cases (complex64 / float32,
single precision on XLA:CPU's FFT library): fft of (2^20,), fft of (1024, 1024) rows, rfft of
(2048, 1024) rows, fft2 of (1024, 1024), irfft of (2048, 513) rows, fft of (512, 1009) rows (a
prime length). Each result is checked against numpy.fft; median of 7 runs after a warm-up call.
Prints fft_1m_ms, fft_rows_ms, rfft_rows_ms, fft2_ms, irfft_rows_ms, fft_prime_ms.
"""
from jax_timing import check, jax, jnp, median_ms, np, report, start


def main():
    args = start(reps=7)
    rng = np.random.default_rng(0)

    def c64(*shape):
        return (rng.random(shape) + 1j * rng.random(shape)).astype(np.complex64)

    cases = {
        "fft_1m": (jnp.fft.fft, np.fft.fft, c64(1 << 20)),
        "fft_rows": (jnp.fft.fft, np.fft.fft, c64(1024, 1024)),
        "rfft_rows": (jnp.fft.rfft, np.fft.rfft, rng.random((2048, 1024), dtype=np.float32)),
        "fft2": (jnp.fft.fft2, np.fft.fft2, c64(1024, 1024)),
        "irfft_rows": (jnp.fft.irfft, np.fft.irfft, c64(2048, 513)),
        "fft_prime": (jnp.fft.fft, np.fft.fft, c64(512, 1009)),
    }
    for name, (jf, nf, x) in cases.items():
        f, xd = jax.jit(jf), jnp.asarray(x)
        got, want = np.asarray(f(xd)), nf(x)
        scale = np.max(np.abs(want))
        check(name, np.abs(got - want) / scale, np.zeros(want.shape), 0, 1e-5)
        report(name, median_ms(lambda: f(xd), args.reps))


if __name__ == "__main__":
    main()
