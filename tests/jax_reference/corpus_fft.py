"""jnp.fft (cases_fft.cpp): fft, ifft, rfft, irfft, hfft, ihfft, fft2, ifft2, rfft2, irfft2, fftn,
ifftn, rfftn, irfftn with n / s padding and truncation, axes and the three norms; fftfreq,
rfftfreq, fftshift, ifftshift; complex64/complex128 and float32/float64 inputs.
"""
import jax.numpy as jnp
import numpy as np

NORMS = ("backward", "ortho", "forward")


def build(add):
    rng = np.random.default_rng(6)
    r = rng.standard_normal((3, 8))
    z = r + 1j * rng.standard_normal((3, 8))
    r3 = rng.standard_normal((2, 6, 5))
    z3 = r3 + 1j * rng.standard_normal((2, 6, 5))
    for dt, (rt, ct) in (("32", (np.float32, np.complex64)), ("64", (np.float64, np.complex128))):
        R, Z, R3, Z3 = r.astype(rt), z.astype(ct), r3.astype(rt), z3.astype(ct)
        for norm in NORMS:
            add(f"fft_{norm}_c{dt}", lambda a, norm=norm: jnp.fft.fft(a, norm=norm), Z)
            add(f"ifft_{norm}_c{dt}", lambda a, norm=norm: jnp.fft.ifft(a, norm=norm), Z)
            add(f"rfft_{norm}_f{dt}", lambda a, norm=norm: jnp.fft.rfft(a, norm=norm), R)
            add(f"irfft_{norm}_c{dt}", lambda a, norm=norm: jnp.fft.irfft(a, norm=norm), Z[:, :5])
            add(f"fftn_{norm}_c{dt}", lambda a, norm=norm: jnp.fft.fftn(a, norm=norm), Z3)
            add(f"irfftn_{norm}_c{dt}", lambda a, norm=norm: jnp.fft.irfftn(a, norm=norm), Z3)
        add(f"fft_real_f{dt}", lambda a: jnp.fft.fft(a), R)
        add(f"fft_pad_c{dt}", lambda a: jnp.fft.fft(a, n=11), Z)
        add(f"fft_trunc_c{dt}", lambda a: jnp.fft.fft(a, n=5), Z)
        add(f"fft_axis0_c{dt}", lambda a: jnp.fft.fft(a, axis=0), Z)
        add(f"ifft_pad_c{dt}", lambda a: jnp.fft.ifft(a, n=12), Z)
        add(f"rfft_odd_f{dt}", lambda a: jnp.fft.rfft(a, n=7), R)
        add(f"rfft_axis0_f{dt}", lambda a: jnp.fft.rfft(a, axis=0), R)
        add(f"irfft_n_c{dt}", lambda a: jnp.fft.irfft(a, n=9), Z)
        add(f"irfft_axis0_c{dt}", lambda a: jnp.fft.irfft(a, axis=0), Z)
        add(f"hfft_c{dt}", lambda a: jnp.fft.hfft(a), Z[:, :5])
        add(f"hfft_n_c{dt}", lambda a: jnp.fft.hfft(a, n=7, norm="ortho"), Z[:, :5])
        add(f"ihfft_f{dt}", lambda a: jnp.fft.ihfft(a), R)
        add(f"fft2_c{dt}", lambda a: jnp.fft.fft2(a), Z3)
        add(f"fft2_s_c{dt}", lambda a: jnp.fft.fft2(a, s=(4, 7)), Z3)
        add(f"ifft2_c{dt}", lambda a: jnp.fft.ifft2(a, norm="ortho"), Z3)
        add(f"rfft2_f{dt}", lambda a: jnp.fft.rfft2(a), R3)
        add(f"irfft2_c{dt}", lambda a: jnp.fft.irfft2(a), Z3)
        add(f"irfft2_s_c{dt}", lambda a: jnp.fft.irfft2(a, s=(6, 7)), Z3)
        add(f"fftn_axes_c{dt}", lambda a: jnp.fft.fftn(a, axes=(0, 2)), Z3)
        add(f"fftn_s_c{dt}", lambda a: jnp.fft.fftn(a, s=(3, 4), axes=(2, 0)), Z3)
        add(f"ifftn_c{dt}", lambda a: jnp.fft.ifftn(a), Z3)
        add(f"rfftn_f{dt}", lambda a: jnp.fft.rfftn(a), R3)
        add(f"rfftn_axes_f{dt}", lambda a: jnp.fft.rfftn(a, axes=(0, 1)), R3)
        add(f"irfftn_s_c{dt}", lambda a: jnp.fft.irfftn(a, s=(5, 8), axes=(0, 2)), Z3)
    # Long and prime lengths (Bluestein in spmd): 1009 points.
    lp = rng.standard_normal(1009) + 1j * rng.standard_normal(1009)
    add("fft_prime_c128", lambda a: jnp.fft.fft(a), lp)
    add("fft_prime_c64", lambda a: jnp.fft.fft(a), lp.astype(np.complex64))
    add("rfft_256_f32", lambda a: jnp.fft.rfft(a), rng.standard_normal(256).astype(np.float32))
    add("fft_int_i32", lambda a: jnp.fft.fft(a), np.arange(6, dtype=np.int32))
    for n in (7, 8):
        add(f"fftfreq_{n}", lambda: jnp.fft.fftfreq(n, d=0.5, dtype=jnp.float32))
        add(f"rfftfreq_{n}", lambda: jnp.fft.rfftfreq(n, dtype=jnp.float32))
        add(f"fftshift_{n}", lambda a: jnp.fft.fftshift(a), np.arange(n * 3).reshape(3, n))
        add(f"ifftshift_{n}", lambda a: jnp.fft.ifftshift(a, axes=1),
            np.arange(n * 3).reshape(3, n).astype(np.float32))
