// The spmd side of corpus_linalg.py: factorizations, solves and products. Factors that are
// unique only up to sign are compared through invariants both sides compute (see the corpus).
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

namespace {
Array mT(const Array& a) { return swapaxes(a, -1, -2); }
}  // namespace

SPMD_JAX_REFERENCE_FAMILY(linalg) {
  // LAPACK (OpenBLAS) on both sides, but blocked and vectorised differently, on matrices with
  // condition numbers up to ~30: results agree to cond * eps of the matrix's scale, above the
  // elementwise default, and entries that are zero in exact arithmetic (q^T q off the diagonal,
  // residuals) only absolutely.
  const Tolerance f32 = tolerance(5e-5, 2e-5);
  const Tolerance f64 = tolerance(1e-11, 1e-12);
  for (const std::string dt : {"f32", "f64"}) {
    const Tolerance t = dt == "f32" ? f32 : f64;
    auto add = [&](const std::string& name, Program p) { c.add(name + "_" + dt, std::move(p), t); };
    add("cholesky", [](const Inputs& x) { return outs(linalg::cholesky(x[0])); });
    add("solve", [](const Inputs& x) { return outs(linalg::solve(x[0], x[1])); });
    add("solve_vec", [](const Inputs& x) { return outs(linalg::solve(x[0], x[1])); });
    add("inv", [](const Inputs& x) { return outs(linalg::inv(x[0])); });
    add("det", [](const Inputs& x) { return outs(linalg::det(x[0])); });
    add("slogdet", [](const Inputs& x) {
      auto r = linalg::slogdet(x[0]);
      return outs(r.sign, r.logabsdet);
    });
    add("eigh", [](const Inputs& x) {
      auto [w, v] = linalg::eigh(x[0]);
      return outs(w, abs(v), matmul(v * expand_dims(w, -2), mT(v)), matmul(mT(v), v));
    });
    auto qr_inv = [](const std::string& mode, bool with_abs_q) -> Program {
      return [mode, with_abs_q](const Inputs& x) {
        auto [q, r] = linalg::qr(x[0], mode);
        Outputs o = {matmul(q, r), abs(r)};
        if (with_abs_q) o.push_back(abs(q));
        o.push_back(matmul(mT(q), q));
        return o;
      };
    };
    add("qr_reduced", qr_inv("reduced", true));
    add("qr_square", qr_inv("reduced", true));
    add("qr_complete", qr_inv("complete", false));
    add("qr_r", [](const Inputs& x) { return outs(abs(linalg::qr(x[0], "r").r)); });
    auto svd_inv = [](bool full) -> Program {
      return [full](const Inputs& x) {
        auto [u, s, vh] = linalg::svd(x[0], full);
        int64_t k = s.shape().back();
        std::vector<Range> ur(u.ndim() - 1);
        ur.push_back(Range{0, k});
        Array uk = slice(u, ur);
        std::vector<Range> vr(vh.ndim() - 2);
        vr.push_back(Range{0, k});
        Array vk = slice(vh, vr);
        return outs(s, matmul(uk * expand_dims(s, -2), vk), abs(uk), abs(vk));
      };
    };
    add("svd", svd_inv(true));
    add("svd_reduced", svd_inv(false));
    add("svd_wide", svd_inv(false));
    add("svd_values", [](const Inputs& x) { return outs(linalg::svd(x[0], true, false).s); });
    c.add(
        "lu_" + dt,
        [](const Inputs& x) {
          auto [lu, piv, perm] = lax::lu(x[0]);
          return outs(lu, piv, perm);
        },
        t);
    add("cho_solve", [](const Inputs& x) { return outs(linalg::cho_solve(x[0], x[1])); });
    add("lstsq", [](const Inputs& x) {
      auto r = linalg::lstsq(x[0], x[1]);
      return outs(r.x, r.residuals, r.rank, r.s);
    });
    for (bool left : {true, false})
      for (bool lower : {true, false})
        for (bool trans : {false, true})
          for (bool unit : {false, true}) {
            if (dt == "f32" && (trans || unit)) continue;
            std::string name = std::string("triangular_solve_") + (left ? "l" : "r") +
                               (lower ? "lo" : "up") + (trans ? "t" : "n") + (unit ? "u" : "d");
            add(name, [=](const Inputs& x) {
              return outs(lax::triangular_solve(x[0], x[1], left, lower, trans, unit));
            });
          }
  }
  c.add(
      "det_singular_f64", [](const Inputs& x) { return outs(linalg::det(x[0])); }, f64);
  c.add("slogdet_singular_f64", [](const Inputs& x) {
    auto r = linalg::slogdet(x[0]);
    return outs(r.sign, r.logabsdet);
  });
  c.add("cholesky_not_pd_f64", [](const Inputs& x) { return outs(linalg::cholesky(x[0])); });

  // ---- products -----------------------------------------------------------------------------
  // Dot products of 4-5 terms in another order than XLA's (OpenBLAS gemm with FMA).
  for (const std::string dt : {"f32", "f64", "c64", "i32", "bf16", "f16"}) {
    std::optional<Tolerance> t;
    if (dt == "f32" || dt == "c64") t = tolerance(1e-5, 1e-6);
    c.add(
        "matmul_" + dt, [](const Inputs& x) { return outs(matmul(x[0], x[1])); }, t);
    c.add(
        "dot_vec_" + dt, [](const Inputs& x) { return outs(dot(x[0], x[1])); }, t);
    c.add(
        "vdot_" + dt, [](const Inputs& x) { return outs(vdot(x[0], x[1])); }, t);
    c.add(
        "einsum_ij_jk_" + dt, [](const Inputs& x) { return outs(einsum("ij,jk->ki", x[0], x[1])); },
        t);
  }
  const Tolerance p32 = tolerance(1e-5, 1e-6);
  c.add(
      "matmul_batched_f32", [](const Inputs& x) { return outs(matmul(x[0], x[1])); }, p32);
  c.add(
      "matmul_bcast_f32", [](const Inputs& x) { return outs(matmul(x[0], x[1])); }, p32);
  c.add(
      "einsum_batch_f32", [](const Inputs& x) { return outs(einsum("bij,bjk->bik", x[0], x[1])); },
      p32);
  c.add(
      "einsum_trace_f32", [](const Inputs& x) { return outs(einsum("ii->", x[0])); }, p32);
  c.add(
      "einsum_diag_f32", [](const Inputs& x) { return outs(einsum("ii->i", x[0])); }, p32);
  c.add(
      "einsum_ellipsis_f32",
      [](const Inputs& x) { return outs(einsum("...ij,...jk->...ik", x[0], x[1])); }, p32);
  c.add(
      "einsum_three_f32",
      [](const Inputs& x) { return outs(einsum("bij,bjk,bk->bi", x[0], x[1], x[2])); }, p32);
  c.add(
      "einsum_implicit_f32", [](const Inputs& x) { return outs(einsum("ij,jk", x[0], x[1])); },
      p32);
  c.add(
      "tensordot_f32",
      [](const Inputs& x) {
        return outs(
            tensordot(x[0], x[1], std::pair<std::vector<int>, std::vector<int>>{{0, 2}, {0, 1}}));
      },
      p32);
  c.add("tensordot_int_f64", [](const Inputs& x) { return outs(tensordot(x[0], x[1], 1)); });
  c.add(
      "dot_general_f32",
      [](const Inputs& x) { return outs(lax::dot_general(x[0], x[1], {2}, {1}, {0}, {0})); }, p32);
  c.add("dot_general_nobatch_f64",
        [](const Inputs& x) { return outs(lax::dot_general(x[0], x[1], {1}, {0})); });
}

}  // namespace spmd::jax_reference
