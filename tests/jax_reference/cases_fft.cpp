// The spmd side of corpus_fft.py: jnp.fft's transforms, norms, lengths and axes; frequencies and
// shifts.
#include <string>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(fft) {
  // kissfft against ducc/pocketfft (XLA:CPU): different factorizations of the same transform. The
  // error of an n-point FFT is ~eps log n of the inputs' norm, which an output element much
  // smaller than that norm sees as a large relative error: an absolute part of a few eps times
  // the inputs' scale (O(1) here, sums of up to 240 terms).
  const Tolerance t32 = tolerance(2e-5, 2e-5);
  const Tolerance t64 = tolerance(1e-12, 1e-13);
  for (const std::string dt : {"32", "64"}) {
    const Tolerance t = dt == "32" ? t32 : t64;
    auto add = [&](const std::string& name, Program p) { c.add(name, std::move(p), t); };
    for (const std::string norm : {"backward", "ortho", "forward"}) {
      add("fft_" + norm + "_c" + dt,
          [norm](const Inputs& x) { return outs(fft::fft(x[0], std::nullopt, -1, norm)); });
      add("ifft_" + norm + "_c" + dt,
          [norm](const Inputs& x) { return outs(fft::ifft(x[0], std::nullopt, -1, norm)); });
      add("rfft_" + norm + "_f" + dt,
          [norm](const Inputs& x) { return outs(fft::rfft(x[0], std::nullopt, -1, norm)); });
      add("irfft_" + norm + "_c" + dt,
          [norm](const Inputs& x) { return outs(fft::irfft(x[0], std::nullopt, -1, norm)); });
      add("fftn_" + norm + "_c" + dt, [norm](const Inputs& x) {
        return outs(fft::fftn(x[0], std::nullopt, std::nullopt, norm));
      });
      add("irfftn_" + norm + "_c" + dt, [norm](const Inputs& x) {
        return outs(fft::irfftn(x[0], std::nullopt, std::nullopt, norm));
      });
    }
    add("fft_real_f" + dt, [](const Inputs& x) { return outs(fft::fft(x[0])); });
    add("fft_pad_c" + dt, [](const Inputs& x) { return outs(fft::fft(x[0], 11)); });
    add("fft_trunc_c" + dt, [](const Inputs& x) { return outs(fft::fft(x[0], 5)); });
    add("fft_axis0_c" + dt, [](const Inputs& x) { return outs(fft::fft(x[0], std::nullopt, 0)); });
    add("ifft_pad_c" + dt, [](const Inputs& x) { return outs(fft::ifft(x[0], 12)); });
    add("rfft_odd_f" + dt, [](const Inputs& x) { return outs(fft::rfft(x[0], 7)); });
    add("rfft_axis0_f" + dt,
        [](const Inputs& x) { return outs(fft::rfft(x[0], std::nullopt, 0)); });
    add("irfft_n_c" + dt, [](const Inputs& x) { return outs(fft::irfft(x[0], 9)); });
    add("irfft_axis0_c" + dt,
        [](const Inputs& x) { return outs(fft::irfft(x[0], std::nullopt, 0)); });
    add("hfft_c" + dt, [](const Inputs& x) { return outs(fft::hfft(x[0])); });
    add("hfft_n_c" + dt, [](const Inputs& x) { return outs(fft::hfft(x[0], 7, -1, "ortho")); });
    add("ihfft_f" + dt, [](const Inputs& x) { return outs(fft::ihfft(x[0])); });
    add("fft2_c" + dt, [](const Inputs& x) { return outs(fft::fft2(x[0])); });
    add("fft2_s_c" + dt, [](const Inputs& x) { return outs(fft::fft2(x[0], Shape{4, 7})); });
    add("ifft2_c" + dt, [](const Inputs& x) {
      return outs(fft::ifft2(x[0], std::nullopt, {-2, -1}, "ortho"));
    });
    add("rfft2_f" + dt, [](const Inputs& x) { return outs(fft::rfft2(x[0])); });
    add("irfft2_c" + dt, [](const Inputs& x) { return outs(fft::irfft2(x[0])); });
    add("irfft2_s_c" + dt, [](const Inputs& x) { return outs(fft::irfft2(x[0], Shape{6, 7})); });
    add("fftn_axes_c" + dt, [](const Inputs& x) {
      return outs(fft::fftn(x[0], std::nullopt, std::vector<int>{0, 2}));
    });
    add("fftn_s_c" + dt, [](const Inputs& x) {
      return outs(fft::fftn(x[0], Shape{3, 4}, std::vector<int>{2, 0}));
    });
    add("ifftn_c" + dt, [](const Inputs& x) { return outs(fft::ifftn(x[0])); });
    add("rfftn_f" + dt, [](const Inputs& x) { return outs(fft::rfftn(x[0])); });
    add("rfftn_axes_f" + dt, [](const Inputs& x) {
      return outs(fft::rfftn(x[0], std::nullopt, std::vector<int>{0, 1}));
    });
    add("irfftn_s_c" + dt, [](const Inputs& x) {
      return outs(fft::irfftn(x[0], Shape{5, 8}, std::vector<int>{0, 2}));
    });
  }
  // 1009 points (Bluestein's algorithm in spmd): the error grows with the length.
  c.add(
      "fft_prime_c128", [](const Inputs& x) { return outs(fft::fft(x[0])); },
      tolerance(1e-11, 1e-11));
  c.add(
      "fft_prime_c64", [](const Inputs& x) { return outs(fft::fft(x[0])); }, tolerance(1e-4, 2e-4));
  c.add(
      "rfft_256_f32", [](const Inputs& x) { return outs(fft::rfft(x[0])); }, tolerance(2e-5, 5e-5));
  c.add(
      "fft_int_i32", [](const Inputs& x) { return outs(fft::fft(x[0])); }, t32);
  for (int n : {7, 8}) {
    c.add("fftfreq_" + std::to_string(n),
          [n](const Inputs&) { return outs(fft::fftfreq(n, 0.5)); });
    c.add("rfftfreq_" + std::to_string(n), [n](const Inputs&) { return outs(fft::rfftfreq(n)); });
    c.add("fftshift_" + std::to_string(n),
          [](const Inputs& x) { return outs(fft::fftshift(x[0])); });
    c.add("ifftshift_" + std::to_string(n),
          [](const Inputs& x) { return outs(fft::ifftshift(x[0], 1)); });
  }
}

}  // namespace spmd::jax_reference
