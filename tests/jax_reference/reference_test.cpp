// The JAX reference test: the programs of tests/jax_reference/corpus_*.py, run in spmd (the
// cases_*.cpp files) on the inputs JAX saw, compared with JAX's outputs (reference.h says how).
// One test per family, and one that counts every compared output. It reads only the committed
// .npy files: scripts/regen-jax-reference.sh re-creates them with JAX.
#include "reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

namespace spmd::jax_reference {

std::map<std::string, FamilyBuilder>& families() {
  static std::map<std::string, FamilyBuilder> f;
  return f;
}

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Complex128:
      return tolerance(1e-12, 1e-14);
    case DType::Float16:
      return tolerance(2e-3, 1e-5);
    case DType::BFloat16:
      return tolerance(1.6e-2, 1e-5);
    default:  // float32, complex64
      return tolerance(2e-6, 1e-7);
  }
}

namespace {

namespace fs = std::filesystem;

fs::path data_dir(const std::string& family) {
  return fs::path(SPMD_SOURCE_DIR) / "tests" / "jax_reference" / "data" / family;
}

// A case's saved arrays: inputs and JAX's outputs, bfloat16 ones converted back.
struct Saved {
  std::vector<Array> in, out;
};

std::map<std::string, Saved> load_family(const std::string& family) {
  static const std::regex file(R"(^([a-z0-9_]+)\.(in|out)([0-9]+)(\.bf16)?\.npy$)");
  std::map<std::string, std::map<std::pair<std::string, int>, Array>> found;
  if (fs::exists(data_dir(family)))
    for (const auto& entry : fs::directory_iterator(data_dir(family))) {
      std::smatch m;
      std::string name = entry.path().filename().string();
      if (!std::regex_match(name, m, file)) {
        ADD_FAILURE() << family << ": unexpected file " << name;
        continue;
      }
      Array a = load_npy(entry.path().string());
      if (m[4].matched) a = astype(a, DType::BFloat16);
      found[m[1]][{m[2], std::stoi(m[3])}] = a;
    }
  std::map<std::string, Saved> cases;
  for (auto& [name, arrays] : found) {
    Saved& s = cases[name];
    for (auto& [key, a] : arrays) {
      std::vector<Array>& list = key.first == "in" ? s.in : s.out;
      if (static_cast<int>(list.size()) != key.second)
        ADD_FAILURE() << family << "." << name << ": " << key.first << key.second
                      << " without the arrays before it";
      list.push_back(a);
    }
  }
  return cases;
}

std::vector<std::complex<double>> values(const Array& a) {
  Array c = astype(a, DType::Complex128);
  return c.to_vector<std::complex<double>>();
}

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

// Compares one output; returns "" or what differs (the first few elements). Without a tolerance
// (a deviation), only the dtype and the shape.
std::string compare(const Array& got, const Array& want, const std::optional<Tolerance>& t) {
  std::ostringstream err;
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    err << "expected " << dtype_name(want.dtype()) << shape_str(want.shape()) << ", got "
        << dtype_name(got.dtype()) << shape_str(got.shape());
    return err.str();
  }
  if (!t) return "";
  const Tolerance& tol = *t;
  const bool exact = tol.exact || !(is_floating(want.dtype()) || is_complex(want.dtype()));
  std::vector<std::complex<double>> g = values(got), w = values(want);
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (exact) {
      ok = same_value(g[i].real(), w[i].real()) && same_value(g[i].imag(), w[i].imag());
    } else {
      bool nan_g = std::isnan(g[i].real()) || std::isnan(g[i].imag());
      bool nan_w = std::isnan(w[i].real()) || std::isnan(w[i].imag());
      bool inf = std::isinf(w[i].real()) || std::isinf(w[i].imag());
      if (nan_g || nan_w) {
        ok = nan_g && nan_w;
      } else if (inf) {
        ok = g[i] == w[i];
      } else {
        double d = std::abs(g[i] - w[i]);
        ok = d <= tol.atol + tol.rtol * std::abs(w[i]);
        if (!ok) worst = std::max(worst, d / (tol.atol + tol.rtol * std::abs(w[i])));
      }
    }
    if (!ok && bad++ < 4) err << " [" << i << "] spmd " << g[i] << " jax " << w[i] << ";";
  }
  if (!bad) return "";
  std::ostringstream head;
  head << bad << " of " << g.size() << " elements differ ("
       << (exact ? "exact"
                 : "tolerance rtol " + std::to_string(tol.rtol) + " atol " +
                       std::to_string(tol.atol) + ", worst " + std::to_string(worst) + "x it")
       << "):" << err.str();
  return head.str();
}

void run_family(const std::string& family) {
  Cases cases;
  families().at(family)(cases);
  std::map<std::string, Saved> saved = load_family(family);
  std::set<std::string> defined;
  for (const Case& c : cases.list()) {
    SCOPED_TRACE(family + "." + c.name);
    EXPECT_TRUE(defined.insert(c.name).second) << "case defined twice";
    auto it = saved.find(c.name);
    if (it == saved.end()) {
      ADD_FAILURE() << "no reference data (run scripts/regen-jax-reference.sh " << family << ")";
      continue;
    }
    if (!c.deviation.empty())
      std::printf("deviation %s.%s: %s\n", family.c_str(), c.name.c_str(), c.deviation.c_str());
    if (!c.run) continue;
    Outputs got;
    try {
      got = c.run(it->second.in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "spmd threw: " << e.what();
      continue;
    }
    const std::vector<Array>& want = it->second.out;
    if (got.size() != want.size()) {
      ADD_FAILURE() << "spmd gave " << got.size() << " outputs, JAX " << want.size();
      continue;
    }
    for (size_t k = 0; k < want.size(); ++k) {
      std::optional<Tolerance> tol;
      if (c.deviation.empty()) tol = c.tol.value_or(default_tolerance(want[k].dtype()));
      EXPECT_EQ(compare(got[k], want[k], tol), "") << "output " << k;
    }
  }
  for (const auto& [name, s] : saved)
    EXPECT_TRUE(defined.count(name))
        << family << "." << name << ": reference data without an spmd program";
}

int64_t count_compared_outputs() {
  int64_t n = 0;
  for (const auto& [family, builder] : families()) {
    Cases cases;
    builder(cases);
    std::map<std::string, Saved> saved = load_family(family);
    for (const Case& c : cases.list())
      if (c.deviation.empty() && c.run && saved.count(c.name))
        n += static_cast<int64_t>(saved[c.name].out.size());
  }
  return n;
}

class FamilyTest : public ::testing::Test {
 public:
  explicit FamilyTest(std::string family) : family_(std::move(family)) {}
  void TestBody() override { run_family(family_); }

 private:
  std::string family_;
};

}  // namespace
}  // namespace spmd::jax_reference

int main(int argc, char** argv) {
  using namespace spmd::jax_reference;
  ::testing::InitGoogleTest(&argc, argv);
  spmd::set_cpu_device_count(8);
  for (const auto& [name, builder] : families())
    ::testing::RegisterTest("JaxReference", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [name = name]() -> ::testing::Test* { return new FamilyTest(name); });
  // The corpus compares at least 1,000 outputs (the issue's bar; deviations not counted): the
  // outputs on disk of every case with an spmd program, which the family tests compare.
  ::testing::RegisterTest("JaxReference", "AtLeast1000OutputsCompared", nullptr, nullptr, __FILE__,
                          __LINE__, []() -> ::testing::Test* {
                            struct Count : ::testing::Test {
                              void TestBody() override {
                                int64_t n = count_compared_outputs();
                                std::printf("%lld outputs compared with JAX's\n",
                                            static_cast<long long>(n));
                                EXPECT_GE(n, 1000);
                              }
                            };
                            return new Count;
                          });
  return RUN_ALL_TESTS();
}
