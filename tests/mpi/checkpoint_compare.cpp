// Compares two training checkpoints (spmd::nn::save_checkpoint files):
//   checkpoint_compare A B [tolerance]
// Both must hold parameters ("params/<i>") and the same arrays (parameters, optimiser state,
// random key) with the same shapes and dtypes, each differing by at most tolerance (default
// 1e-5) relative to the array's largest magnitude. Prints the worst difference; exits 0 when
// they match, 1 when they do not, 2 on bad input.
#include <spmd/spmd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace spmd;

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s A B [tolerance]\n", argv[0]);
    return 2;
  }
  const double tolerance = argc == 4 ? std::atof(argv[3]) : 1e-5;
  try {
    nn::Checkpoint a = nn::load_checkpoint(argv[1]);
    nn::Checkpoint b = nn::load_checkpoint(argv[2]);
    const int64_t n = a.ints.at("params/#");
    if (n <= 0) fail("expected parameters in ", argv[1], ", got params/# = ", n);
    if (b.ints.at("params/#") != n)
      fail("the checkpoints hold ", n, " and ", b.ints.at("params/#"), " parameter arrays");
    if (a.ints.at("step") != b.ints.at("step"))
      fail("the checkpoints are at steps ", a.ints.at("step"), " and ", b.ints.at("step"));
    if (a.arrays.size() != b.arrays.size())
      fail("the checkpoints hold ", a.arrays.size(), " and ", b.arrays.size(), " arrays");
    bool ok = true;
    double worst = 0;
    for (const auto& [name, x] : a.arrays) {
      auto other = b.arrays.find(name);
      if (other == b.arrays.end()) fail(name, ": in ", argv[1], " but not in ", argv[2]);
      const Array& y = other->second;
      if (x.shape() != y.shape() || x.dtype() != y.dtype())
        fail(name, ": ", shape_str(x.shape()), " ", dtype_name(x.dtype()), " against ",
             shape_str(y.shape()), " ", dtype_name(y.dtype()));
      auto xv = x.to_vector<double>();
      auto yv = y.to_vector<double>();
      double scale = 0, diff = 0;
      for (size_t k = 0; k < xv.size(); ++k) {
        scale = std::max(scale, std::abs(xv[k]));
        diff = std::max(diff, std::abs(xv[k] - yv[k]));
      }
      double rel = scale > 0 ? diff / scale : diff;
      worst = std::max(worst, rel);
      std::printf("%s %s: max |A - B| = %.3g, relative %.3g\n", name.c_str(),
                  shape_str(x.shape()).c_str(), diff, rel);
      if (!(rel <= tolerance)) ok = false;
    }
    std::printf("%s: worst relative difference %.3g (tolerance %.3g)\n", ok ? "match" : "MISMATCH",
                worst, tolerance);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
