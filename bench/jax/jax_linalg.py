"""JAX counterpart of bench_linalg: jnp.linalg.cholesky, solve and eigh on float32 under jax.jit
(LAPACK kernels on XLA:CPU): one 1024 x 1024 symmetric positive definite matrix (solve with one
right-hand side) (cholesky, solve, eigh), and 256 matrices of 64 x 64 under jax.jit(jax.vmap(...))
(cholesky_loop, solve_loop, eigh_loop: bench_linalg's names for the vmapped rows). The matrices
are M Mᵀ / n + I; results are checked (L Lᵀ = A, A x = b, A V = V diag(w)) in NumPy first.
Median of 7 runs after a warm-up call.
"""
import os
import sys

from jax_timing import check, jax, jnp, median_ms, np, report, start

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from linalg_numpy import spd  # noqa: E402  (bench/: the NumPy baseline's matrices)


def main():
    args = start(reps=7)
    rng = np.random.default_rng(0)
    a, b = spd(rng, (1024, 1024)), rng.random(1024, dtype=np.float32)
    sa, sb = spd(rng, (256, 64, 64)), rng.random((256, 64), dtype=np.float32)
    la = jnp.linalg
    cases = {
        "cholesky": (jax.jit(la.cholesky), (a,)),
        "solve": (jax.jit(la.solve), (a, b)),
        "eigh": (jax.jit(la.eigh), (a,)),
        "cholesky_loop": (jax.jit(jax.vmap(la.cholesky)), (sa,)),
        "solve_loop": (jax.jit(jax.vmap(la.solve)), (sa, sb)),
        "eigh_loop": (jax.jit(jax.vmap(la.eigh)), (sa,)),
    }
    for name, (f, xs) in cases.items():
        xd = [jnp.asarray(v) for v in xs]
        out = f(*xd)
        if name.startswith("cholesky"):
            l = np.asarray(out, np.float64)
            check(name, l @ np.swapaxes(l, -1, -2), xs[0], 0, 1e-3)
        elif name.startswith("solve"):
            check(name, np.einsum("...ij,...j->...i", xs[0], np.asarray(out)), xs[1], 0, 1e-3)
        else:
            w, v = (np.asarray(t, np.float64) for t in out)
            check(name, xs[0] @ v, v * w[..., None, :], 0, 1e-3)
        report(name, median_ms(lambda: f(*xd), args.reps))


if __name__ == "__main__":
    main()
