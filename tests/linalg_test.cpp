// matmul, dot, tensordot, einsum and lax::dot_general against naive loops over every index;
// sizes from 1x1 to ones large enough for the BLAS path; and the contraction errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "test_util.h"

namespace spmd {

// Readable test parameters in gtest's failure messages.
static void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }

namespace {

using test_util::ravel_index;
using test_util::unravel;

// Values as `dtype` holds them: small integers for int32, uniform in [-1, 1) for floats.
std::vector<double> random_values(int64_t n, DType dtype, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  if (is_integer(dtype)) {
    std::uniform_int_distribution<int> dist(-9, 9);
    for (double& x : v) x = dist(rng);
  } else {
    std::uniform_real_distribution<double> dist(-1, 1);
    for (double& x : v) x = dist(rng);
    if (dtype == float32)
      for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

struct Operand {
  std::vector<double> values;
  Shape shape;
  Array array;
};

Operand operand(const Shape& shape, DType dtype, unsigned seed) {
  auto v = random_values(shape_size(shape), dtype, seed);
  return {v, shape, astype(Array(v, shape), dtype)};
}

// Float32 sums of k products of values in [-1, 1) are good to about k ulps.
void expect_matches(const Array& got, const Shape& shape, const std::vector<double>& want,
                    DType dtype, int64_t k) {
  EXPECT_EQ(got.dtype(), dtype);
  EXPECT_EQ(got.shape(), shape);
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  double tol = dtype == float32   ? 2e-7 * static_cast<double>(std::max<int64_t>(k, 1)) + 1e-6
               : dtype == float64 ? 1e-13 * static_cast<double>(std::max<int64_t>(k, 1))
                                  : 0;
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 10; ++i)
    if (!(std::abs(g[i] - want[i]) <= tol)) {
      ++bad;
      ADD_FAILURE() << "at " << i << ": got " << g[i] << ", want " << want[i] << " (tol " << tol
                    << ")";
    }
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

// ---- matmul ------------------------------------------------------------------------------------

// numpy's matmul by loops: 1-D operands get a unit axis (removed again afterwards), batch axes
// broadcast, and out[..., i, j] = sum_k a[..., i, k] * b[..., k, j].
std::vector<double> ref_matmul(const Operand& a, const Operand& b, Shape* out_shape) {
  Shape as = a.shape, bs = b.shape;
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t nb = std::max(ab.size(), bb.size());
  while (ab.size() < nb) ab.insert(ab.begin(), 1);
  while (bb.size() < nb) bb.insert(bb.begin(), 1);
  Shape batch(nb);
  for (size_t d = 0; d < nb; ++d) batch[d] = std::max(ab[d], bb[d]);
  std::vector<double> out;
  for (int64_t f = 0; f < shape_size(batch); ++f) {
    auto bi = unravel(f, batch);
    std::vector<int64_t> ia(nb), ib(nb);
    for (size_t d = 0; d < nb; ++d) {
      ia[d] = ab[d] == 1 ? 0 : bi[d];
      ib[d] = bb[d] == 1 ? 0 : bi[d];
    }
    int64_t a0 = ravel_index(ia, ab) * M * K, b0 = ravel_index(ib, bb) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a.values[a0 + i * K + k] * b.values[b0 + k * N + j];
        out.push_back(s);
      }
  }
  Shape os = batch;
  if (!a_vec) os.push_back(M);
  if (!b_vec) os.push_back(N);
  *out_shape = os;
  return out;
}

struct MatmulCase {
  Shape a, b;
};
void PrintTo(const MatmulCase& c, std::ostream* os) {
  *os << shape_str(c.a) << " @ " << shape_str(c.b);
}

class Matmul : public testing::TestWithParam<std::tuple<MatmulCase, DType>> {};

TEST_P(Matmul, MatchesNaiveLoop) {
  auto [c, dtype] = GetParam();
  Operand a = operand(c.a, dtype, 1), b = operand(c.b, dtype, 2);
  Shape os;
  auto want = ref_matmul(a, b, &os);
  expect_matches(matmul(a.array, b.array), os, want, dtype, c.a.back());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Matmul,
    testing::Combine(testing::Values(MatmulCase{{1, 1}, {1, 1}}, MatmulCase{{7, 13}, {13, 5}},
                                     MatmulCase{{64, 128}, {128, 96}},
                                     MatmulCase{{4, 7, 13}, {4, 13, 5}},
                                     MatmulCase{{2, 1, 3, 4}, {5, 4, 6}},
                                     MatmulCase{{3, 4}, {2, 4, 5}},
                                     MatmulCase{{3, 40, 50}, {50, 60}}, MatmulCase{{4}, {4, 5}},
                                     MatmulCase{{3, 4}, {4}}, MatmulCase{{6}, {6}},
                                     MatmulCase{{4}, {2, 4, 5}}, MatmulCase{{2, 3, 4}, {4}},
                                     MatmulCase{{0, 3}, {3, 2}}, MatmulCase{{2, 0}, {0, 3}}),
                     testing::Values(float32, float64, int32)),
    [](const auto& info) {
      const MatmulCase& c = std::get<0>(info.param);
      std::string name;
      for (const Shape* s : {&c.a, &c.b}) {
        for (int64_t d : *s) name += std::to_string(d) + "x";
        name.back() = '_';
      }
      return name + dtype_name(std::get<1>(info.param));
    });

TEST(MatmulPromotion, MixedDtypesPromote) {
  Operand a = operand({3, 4}, int32, 3), b = operand({4, 2}, float32, 4);
  Shape os;
  auto want = ref_matmul(a, b, &os);
  expect_matches(matmul(a.array, b.array), os, want, float32, 4);
  EXPECT_EQ(matmul(astype(a.array, float64), b.array).dtype(), float64);
}

TEST(MatmulErrors, ContractingSizeMismatchNamesBothShapes) {
  expect_error([] { matmul(zeros({3, 4}), zeros({5, 6})); }, {"matmul", "(3, 4)", "(5, 6)"});
  expect_error([] { matmul(zeros({4}), zeros({5})); }, {"matmul", "(4,)", "(5,)"});
  expect_error(
      [] {
        matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      {"matmul", "batch", "(2, 3, 4)", "(3, 4, 5)"});
}

TEST(MatmulErrors, ScalarAndBoolOperandsAreRejected) {
  expect_error([] { matmul(Array(2.0f), zeros({2, 2})); }, {"matmul", "scalar"});
  expect_error([] { matmul(zeros({2, 2}, bool_), zeros({2, 2}, bool_)); }, {"matmul", "bool"});
}

// ---- lax::dot_general --------------------------------------------------------------------------

// Output axes: batch (in lhs_batch order), lhs free, rhs free (each ascending); the sum runs
// over every contracting index.
std::vector<double> ref_dot_general(const Operand& a, const Operand& b, const std::vector<int>& lc,
                                    const std::vector<int>& rc, const std::vector<int>& lb,
                                    const std::vector<int>& rb, Shape* out_shape) {
  auto is_in = [](const std::vector<int>& v, int d) {
    return std::find(v.begin(), v.end(), d) != v.end();
  };
  std::vector<int> af, bf;
  for (int d = 0; d < static_cast<int>(a.shape.size()); ++d)
    if (!is_in(lc, d) && !is_in(lb, d)) af.push_back(d);
  for (int d = 0; d < static_cast<int>(b.shape.size()); ++d)
    if (!is_in(rc, d) && !is_in(rb, d)) bf.push_back(d);
  Shape os, cs;
  for (int d : lb) os.push_back(a.shape[d]);
  for (int d : af) os.push_back(a.shape[d]);
  for (int d : bf) os.push_back(b.shape[d]);
  for (int d : lc) cs.push_back(a.shape[d]);
  *out_shape = os;
  std::vector<double> out;
  for (int64_t f = 0; f < shape_size(os); ++f) {
    auto o = unravel(f, os);
    std::vector<int64_t> ia(a.shape.size()), ib(b.shape.size());
    size_t p = 0;
    for (size_t k = 0; k < lb.size(); ++k, ++p) ia[lb[k]] = ib[rb[k]] = o[p];
    for (int d : af) ia[d] = o[p++];
    for (int d : bf) ib[d] = o[p++];
    double s = 0;
    for (int64_t c = 0; c < shape_size(cs); ++c) {
      auto ci = unravel(c, cs);
      for (size_t k = 0; k < lc.size(); ++k) ia[lc[k]] = ib[rc[k]] = ci[k];
      s += a.values[ravel_index(ia, a.shape)] * b.values[ravel_index(ib, b.shape)];
    }
    out.push_back(s);
  }
  return out;
}

struct DotGeneralCase {
  const char* name;
  Shape a, b;
  std::vector<int> lc, rc, lb, rb;
};
void PrintTo(const DotGeneralCase& c, std::ostream* os) {
  *os << c.name << ": " << shape_str(c.a) << " x " << shape_str(c.b);
}

class DotGeneral : public testing::TestWithParam<std::tuple<DotGeneralCase, DType>> {};

TEST_P(DotGeneral, MatchesNaiveLoop) {
  auto [c, dtype] = GetParam();
  Operand a = operand(c.a, dtype, 5), b = operand(c.b, dtype, 6);
  Shape os;
  auto want = ref_dot_general(a, b, c.lc, c.rc, c.lb, c.rb, &os);
  int64_t k = 1;
  for (int d : c.lc) k *= c.a[d];
  expect_matches(lax::dot_general(a.array, b.array, c.lc, c.rc, c.lb, c.rb), os, want, dtype, k);
}

INSTANTIATE_TEST_SUITE_P(
    Dims, DotGeneral,
    testing::Combine(
        testing::Values(
            DotGeneralCase{"matmul", {3, 4}, {4, 5}, {1}, {0}, {}, {}},
            DotGeneralCase{"lhs_transposed", {4, 3}, {4, 5}, {0}, {0}, {}, {}},
            DotGeneralCase{"rhs_transposed", {3, 4}, {5, 4}, {1}, {1}, {}, {}},
            DotGeneralCase{"both_transposed", {4, 3}, {5, 4}, {0}, {1}, {}, {}},
            DotGeneralCase{"leading_batch", {2, 3, 4}, {2, 4, 5}, {2}, {1}, {0}, {0}},
            DotGeneralCase{"inner_batch", {3, 2, 4}, {4, 5, 2}, {2}, {0}, {1}, {2}},
            DotGeneralCase{"two_contracting", {2, 3, 4}, {4, 3, 5}, {1, 2}, {1, 0}, {}, {}},
            DotGeneralCase{
                "two_batch_swapped", {2, 3, 4, 5}, {3, 2, 5, 6}, {3}, {2}, {0, 1}, {1, 0}},
            DotGeneralCase{"outer_product", {3}, {4}, {}, {}, {}, {}},
            DotGeneralCase{"batch_no_contraction", {2, 3}, {2, 4}, {}, {}, {0}, {0}},
            DotGeneralCase{"full_contraction", {3, 4}, {4, 3}, {0, 1}, {1, 0}, {}, {}},
            DotGeneralCase{"free_axes_between", {5, 2, 6}, {6, 3, 2}, {2}, {0}, {1}, {2}},
            DotGeneralCase{"large_blas", {4, 48, 96}, {4, 96, 40}, {2}, {1}, {0}, {0}},
            DotGeneralCase{"large_transposed", {96, 48}, {40, 96}, {0}, {1}, {}, {}}),
        testing::Values(float32, float64, int32)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + dtype_name(std::get<1>(info.param));
    });

TEST(DotGeneralErrors, ContractingSizeMismatch) {
  expect_error(
      [] {
        lax::dot_general(zeros({3, 4}), zeros({5, 6}), {1}, {0});
      },
      {"dot_general", "f32[3,4]", "f32[5,6]", "contracting"});
}

TEST(DotGeneralErrors, BatchSizeMismatch) {
  expect_error(
      [] {
        lax::dot_general(zeros({2, 3, 4}), zeros({3, 4, 5}), {2}, {1}, {0}, {0});
      },
      {"dot_general", "batch", "f32[2,3,4]", "f32[3,4,5]"});
}

TEST(DotGeneralErrors, BadDimensionNumbers) {
  expect_error(
      [] {
        lax::dot_general(zeros({3, 4}), zeros({4, 5}), {2}, {0});
      },
      {"dot_general", "2", "f32[3,4]"});
  expect_error(
      [] {
        lax::dot_general(zeros({3, 3}), zeros({3, 3}), {0, 0}, {0, 1});
      },
      {"dot_general", "repeated"});
  expect_error(
      [] {
        lax::dot_general(zeros({3, 4}), zeros({4, 5}), {1}, {});
      },
      {"dot_general", "as many"});
  expect_error(
      [] {
        lax::dot_general(zeros({3, 4}), zeros({4, 5}, float64), {1}, {0});
      },
      {"dot_general", "dtype", "f32[3,4]", "f64[4,5]"});
}

// ---- dot, tensordot ----------------------------------------------------------------------------

TEST(Dot, VectorsGiveInnerProduct) {
  Operand a = operand({50}, float32, 7), b = operand({50}, float32, 8);
  Shape os;
  auto want = ref_dot_general(a, b, {0}, {0}, {}, {}, &os);
  expect_matches(dot(a.array, b.array), {}, want, float32, 50);
}

TEST(Dot, MatricesGiveMatrixProduct) {
  Operand a = operand({7, 13}, float64, 9), b = operand({13, 5}, float64, 10);
  Shape os;
  auto want = ref_matmul(a, b, &os);
  expect_matches(dot(a.array, b.array), os, want, float64, 13);
}

TEST(Dot, NdWithVectorContractsLastAxis) {
  Operand a = operand({3, 4, 5}, int32, 11), b = operand({5}, int32, 12);
  Shape os;
  auto want = ref_dot_general(a, b, {2}, {0}, {}, {}, &os);
  EXPECT_EQ(os, (Shape{3, 4}));
  expect_matches(dot(a.array, b.array), os, want, int32, 5);
}

TEST(Dot, NdWithNdContractsLastWithSecondToLast) {
  // numpy: dot(a, b)[i, j, k, m] = sum(a[i, j, :] * b[k, :, m]).
  Operand a = operand({2, 3, 4}, float32, 13), b = operand({5, 4, 6}, float32, 14);
  Shape os;
  auto want = ref_dot_general(a, b, {2}, {1}, {}, {}, &os);
  EXPECT_EQ(os, (Shape{2, 3, 5, 6}));
  expect_matches(dot(a.array, b.array), os, want, float32, 4);
}

TEST(Dot, ScalarOperandScales) {
  Operand b = operand({2, 3}, float32, 15);
  std::vector<double> want;
  for (double v : b.values) want.push_back(2.5 * v);
  expect_matches(dot(Array(2.5f), b.array), {2, 3}, want, float32, 1);
}

TEST(Dot, MismatchedSizesAreAnError) {
  expect_error([] { dot(zeros({3}), zeros({4})); }, {"dot", "(3,)", "(4,)"});
  expect_error([] { dot(zeros({2, 3}), zeros({4, 2})); }, {"dot", "(2, 3)", "(4, 2)"});
}

TEST(TensorDot, IntegerAxesContractTrailingWithLeading) {
  struct Case {
    Shape a, b;
    int axes;
  };
  for (const Case& c : {Case{{3, 4, 5}, {4, 5, 6}, 2}, Case{{3, 4, 5}, {5, 2}, 1},
                        Case{{2, 3}, {4}, 0}, Case{{3, 4}, {3, 4}, 2}}) {
    Operand a = operand(c.a, float32, 16), b = operand(c.b, float32, 17);
    std::vector<int> lc, rc;
    for (int i = 0; i < c.axes; ++i) {
      lc.push_back(static_cast<int>(c.a.size()) - c.axes + i);
      rc.push_back(i);
    }
    Shape os;
    auto want = ref_dot_general(a, b, lc, rc, {}, {}, &os);
    expect_matches(tensordot(a.array, b.array, c.axes), os, want, float32, 20);
  }
}

TEST(TensorDot, AxisPairsInAnyOrder) {
  Operand a = operand({3, 4, 5}, float64, 18), b = operand({5, 3, 2}, float64, 19);
  Shape os;
  auto want = ref_dot_general(a, b, {0, 2}, {1, 0}, {}, {}, &os);
  EXPECT_EQ(os, (Shape{4, 2}));
  expect_matches(tensordot(a.array, b.array, {{0, 2}, {1, 0}}), os, want, float64, 15);
  expect_matches(tensordot(a.array, b.array, {{-3, -1}, {-2, 0}}), os, want, float64, 15);
}

TEST(TensorDot, BadAxesAreAnError) {
  expect_error(
      [] {
        tensordot(zeros({3, 4}), zeros({5, 6}), 1);
      },
      {"tensordot", "(3, 4)", "(5, 6)"});
  expect_error([] { tensordot(zeros({3, 4}), zeros({4}), 2); }, {"tensordot", "2"});
  expect_error(
      [] {
        tensordot(zeros({3, 4}), zeros({4, 3}), {{0, 1}, {1}});
      },
      {"tensordot", "2", "1"});
  expect_error(
      [] {
        tensordot(zeros({3, 4}), zeros({4, 3}), {{2}, {0}});
      },
      {"tensordot", "axis 2"});
}

// ---- einsum ------------------------------------------------------------------------------------

// Sums the product over every assignment of every letter; the output keeps `out`'s letters.
std::vector<double> ref_einsum(const std::vector<std::string>& ins,
                               const std::vector<const Operand*>& ops, const std::string& out,
                               Shape* out_shape) {
  std::map<char, int64_t> size;
  for (size_t t = 0; t < ins.size(); ++t)
    for (size_t d = 0; d < ins[t].size(); ++d) size[ins[t][d]] = ops[t]->shape[d];
  std::string letters;
  Shape all;
  for (auto& [c, n] : size) {
    letters += c;
    all.push_back(n);
  }
  Shape os;
  for (char c : out) os.push_back(size[c]);
  *out_shape = os;
  std::vector<double> result(shape_size(os), 0.0);
  for (int64_t f = 0; f < shape_size(all); ++f) {
    auto v = unravel(f, all);
    auto value_of = [&](char c) { return v[letters.find(c)]; };
    double prod = 1;
    for (size_t t = 0; t < ins.size(); ++t) {
      std::vector<int64_t> idx;
      for (char c : ins[t]) idx.push_back(value_of(c));
      prod *= ops[t]->values[ravel_index(idx, ops[t]->shape)];
    }
    std::vector<int64_t> o;
    for (char c : out) o.push_back(value_of(c));
    result[ravel_index(o, os)] += prod;
  }
  return result;
}

struct EinsumCase {
  const char* spec;
  std::string a_letters, b_letters, out;
  Shape a, b;
};
void PrintTo(const EinsumCase& c, std::ostream* os) { *os << "'" << c.spec << "'"; }

class Einsum : public testing::TestWithParam<EinsumCase> {};

TEST_P(Einsum, TwoOperandsMatchNaiveSum) {
  const EinsumCase& c = GetParam();
  Operand a = operand(c.a, float32, 20), b = operand(c.b, float32, 21);
  Shape os;
  auto want = ref_einsum({c.a_letters, c.b_letters}, {&a, &b}, c.out, &os);
  expect_matches(einsum(c.spec, a.array, b.array), os, want, float32, 60);
}

INSTANTIATE_TEST_SUITE_P(
    Specs, Einsum,
    testing::Values(EinsumCase{"ij,jk->ik", "ij", "jk", "ik", {3, 4}, {4, 5}},
                    EinsumCase{"bij,bjk->bik", "bij", "bjk", "bik", {2, 3, 4}, {2, 4, 5}},
                    EinsumCase{"ij,ij->i", "ij", "ij", "i", {3, 4}, {3, 4}},
                    EinsumCase{"ij,jk", "ij", "jk", "ik", {3, 4}, {4, 5}},
                    EinsumCase{"ba,ac", "ba", "ac", "bc", {3, 4}, {4, 5}},
                    EinsumCase{"ij,ij", "ij", "ij", "", {3, 4}, {3, 4}},
                    EinsumCase{"ij,jk->ki", "ij", "jk", "ki", {3, 4}, {4, 5}},
                    EinsumCase{"bij,bkj->bik", "bij", "bkj", "bik", {2, 3, 4}, {2, 5, 4}},
                    EinsumCase{"i,j->ij", "i", "j", "ij", {3}, {4}},
                    EinsumCase{"ij,ij->ij", "ij", "ij", "ij", {3, 4}, {3, 4}},
                    EinsumCase{"ijk,ikl->jl", "ijk", "ikl", "jl", {2, 3, 4}, {2, 4, 5}},
                    EinsumCase{"ij,kj->", "ij", "kj", "", {3, 4}, {2, 4}},
                    EinsumCase{" i j , j k -> i k ", "ij", "jk", "ik", {2, 3}, {3, 4}},
                    EinsumCase{"ij,k->ik", "ij", "k", "ik", {3, 4}, {5}}),
    [](const auto& info) {
      std::string name;
      for (char c : std::string(info.param.spec))
        name += std::isalpha(static_cast<unsigned char>(c)) ? std::string(1, c)
                : c == ','                                  ? "_"
                : c == '>'                                  ? "_to_"
                                                            : "";
      return name + "_" + std::to_string(info.index);
    });

TEST(EinsumOneOperand, TransposeAndSums) {
  Operand a = operand({3, 4}, float32, 22);
  struct Case {
    const char* spec;
    std::string out;
  };
  for (const Case& c : {Case{"ij->ji", "ji"}, Case{"ij->i", "i"}, Case{"ij->", ""},
                        Case{"ij->ij", "ij"}, Case{"ij", "ij"}, Case{"ji", "ij"}}) {
    Shape os;
    // "ji" implicitly outputs alphabetical "ij": the transpose of the operand's own order.
    std::string in = std::string(c.spec).substr(0, 2);
    auto want = ref_einsum({in}, {&a}, c.out, &os);
    expect_matches(einsum(c.spec, a.array), os, want, float32, 4);
  }
}

TEST(EinsumErrors, MismatchedLetterSizes) {
  expect_error(
      [] {
        einsum("ij,jk->ik", zeros({3, 4}), zeros({5, 6}));
      },
      {"einsum", "'j'", "4", "5"});
}

TEST(EinsumErrors, BadSpecs) {
  Array a = zeros({3, 4}), b = zeros({4, 5});
  expect_error([&] { einsum("ij->ij", a, b); }, {"einsum", "1 operands", "2"});
  expect_error([&] { einsum("ijk,jk->ik", a, b); }, {"einsum", "'ijk'", "(3, 4)"});
  expect_error([&] { einsum("ij,jk->iz", a, b); }, {"einsum", "'z'"});
  // A repeated index is a diagonal (tests/jnp_semantics_test.cpp); of unequal sizes, an error.
  expect_error([&] { einsum("ii", zeros({3, 4})); }, {"einsum", "repeated", "'i'", "3", "4"});
  expect_error([&] { einsum("i.j,jk", a, b); }, {"einsum", "'.'"});
}

}  // namespace
}  // namespace spmd
