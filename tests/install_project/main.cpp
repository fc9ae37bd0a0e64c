// Built against the installed package by check.cmake: computes with spmd (eager ops, jit, vmap,
// random numbers, several devices) and compares with plain C++; exits non-zero on a mismatch.
#include <spmd/spmd.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

}  // namespace

int main() {
  try {
    spmd::set_cpu_device_count(2);
    check(spmd::device_count() == 2, "two emulated devices");

    // sum of squares of 0..9, eagerly and under jit.
    spmd::Array x = spmd::arange(0, 10, 1, spmd::DType::Float32);
    double expected = 0;
    for (int i = 0; i < 10; ++i) expected += i * i;
    check(spmd::sum(x * x).item<float>() == expected, "eager sum of squares");
    auto sum_sq = spmd::jit([](const spmd::Array& v) { return spmd::sum(v * v); });
    check(sum_sq(x).item<float>() == expected, "jit sum of squares");

    // vmap of a dot product over rows, against a loop.
    std::vector<float> a(12), b(12);
    for (int i = 0; i < 12; ++i) {
      a[i] = 0.5f * i;
      b[i] = 3.0f - i;
    }
    spmd::Array rows = spmd::vmap([](const spmd::Array& u, const spmd::Array& v) {
      return spmd::sum(u * v);
    })(spmd::Array(a, {4, 3}), spmd::Array(b, {4, 3}));
    auto got = rows.to_vector<float>();
    bool rows_ok = got.size() == 4;
    for (int r = 0; r < 4 && rows_ok; ++r) {
      float want = 0;
      for (int c = 0; c < 3; ++c) want += a[r * 3 + c] * b[r * 3 + c];
      rows_ok = std::fabs(got[r] - want) <= 1e-5f * (1 + std::fabs(want));
    }
    check(rows_ok, "vmap of a row-wise dot product");

    // Random numbers: deterministic and inside [0, 1).
    auto u1 = spmd::random::uniform(spmd::random::key(7), {1000}).to_vector<float>();
    auto u2 = spmd::random::uniform(spmd::random::key(7), {1000}).to_vector<float>();
    bool in_range = true;
    for (float v : u1) in_range = in_range && v >= 0.f && v < 1.f;
    check(u1 == u2 && in_range, "random::uniform is deterministic and in [0, 1)");

    // Placement on the second device.
    spmd::Array y = spmd::device_put(x, spmd::devices()[1]);
    check(y.devices().size() == 1 && y.devices()[0].id == 1, "device_put to device 1");

    check(spmd::Array({1.0, 2.0}).str() == "Array([1., 2.], dtype=float32)", "printing");

    // Errors arrive as spmd::Error.
    bool threw = false;
    try {
      spmd::Array({1.0, 2.0}).item<float>();
    } catch (const spmd::Error&) {
      threw = true;
    }
    check(threw, "item() of a non-scalar throws spmd::Error");
  } catch (const std::exception& e) {
    std::printf("FAIL: unexpected exception: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
