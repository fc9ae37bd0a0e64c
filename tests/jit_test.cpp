// jit: caching (counted traces), static arguments, the printed Program of vmap(dot), composition
// with vmap, closures, simplification, and jit output against eager output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "compile/simplify.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;

Array random_f32(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(static_cast<float>(lo), static_cast<float>(hi));
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (auto& x : v) x = u(rng);
  return Array(v, shape);
}

void expect_same(const Array& got, const Array& want, double tol = 2e-6) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype()));
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i]));
    if (!ok && reported++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << w[i];
  }
}

std::vector<std::string> primitive_names(const Program& p) {
  std::vector<std::string> out;
  for (auto& eq : p.equations) out.push_back(eq.primitive->name());
  return out;
}

// ---- the seeds' first listing: jit(vmap(dot)) on ten million pairs ----------------------------
TEST(JitVmapDot, TenMillionPairsMatchANaiveLoop) {
  const int64_t n = 10000000;
  std::vector<float> av(n * 3), bv(n * 3);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&s] {  // xorshift64*: fast, good enough for test data
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<float>(
        static_cast<double>((s * 2685821657736338717ull) >> 40) / (1 << 24) * 2 - 1);
  };
  for (auto& x : av) x = next();
  for (auto& x : bv) x = next();
  Array a(av, {n, 3}), b(bv, {n, 3});
  auto dot = [](Array x, Array y) { return spmd::dot(x, y); };
  Array out = jit(vmap(dot))(a, b);
  ASSERT_EQ(out.shape(), Shape({n}));
  ASSERT_EQ(out.dtype(), DType::Float32);
  const float* o = out.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* x = &av[i * 3];
    const float* y = &bv[i * 3];
    float p0 = x[0] * y[0], p1 = x[1] * y[1], p2 = x[2] * y[2];
    float naive = p0;
    naive += p1;
    naive += p2;
    // Any summation order of three float32 products (FMA or not) lies within this bound.
    float bound = 3 * FLT_EPSILON * (std::abs(p0) + std::abs(p1) + std::abs(p2));
    if (!(std::abs(o[i] - naive) <= bound) && bad++ < 5)
      ADD_FAILURE() << "pair " << i << ": got " << o[i] << ", naive loop " << naive;
  }
  EXPECT_EQ(bad, 0);
}

// As JAX prints jax.make_jaxpr(jax.vmap(jnp.dot)): one dot_general whose batch dimension is the
// mapped axis (JAX 0.10.2: dot_general[dimension_numbers=(([1], [1]), ([0], [0]))]), and nested
// vmaps add batch dimensions to the same equation.
TEST(JitVmapDot, PrintedProgramIsOneBatchedDotGeneral) {
  auto dot = [](Array x, Array y) { return spmd::dot(x, y); };
  Program p = make_jaxpr(vmap(dot))(zeros({10, 3}), zeros({10, 3}));
  EXPECT_EQ(p.str(),
            "{ lambda ; a:f32[10,3] b:f32[10,3]. let\n"
            "    c:f32[10] = dot_general[dimension_numbers=(((1,), (1,)), ((0,), (0,)))] a b\n"
            "  in (c,) }");
  std::ostringstream os;
  os << p;
  EXPECT_EQ(os.str(), p.str());
  Program nested = make_jaxpr(vmap(vmap(dot)))(zeros({4, 10, 3}), zeros({4, 10, 3}));
  ASSERT_EQ(nested.equations.size(), 1u);
  EXPECT_EQ(nested.equations[0].primitive->name(), "dot_general");
  EXPECT_NE(nested.str().find("(((2,), (2,)), ((0, 1), (0, 1)))"), std::string::npos)
      << nested.str();
}

// ---- caching ----------------------------------------------------------------------------------
TEST(JitCache, SecondCallWithSameShapesDoesNotTrace) {
  int traced = 0;
  auto f = jit([&](const Array& x) {
    ++traced;
    return x * 2.0;
  });
  expect_same(f(Array({1.0, 2.0, 3.0})), Array({2.0, 4.0, 6.0}));
  expect_same(f(Array({4.0, 5.0, 6.0})), Array({8.0, 10.0, 12.0}));
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(f.trace_count(), 1);
}

TEST(JitCache, NewShapeTracesOnce) {
  int traced = 0;
  auto f = jit([&](const Array& x) {
    ++traced;
    return sum(x);
  });
  f(ones({3}));
  f(ones({4}));
  f(ones({4}));
  expect_same(f(ones({3})), Array(3.0f));
  EXPECT_EQ(traced, 2);
  EXPECT_EQ(f.trace_count(), 2);
}

TEST(JitCache, NewDtypeOrWeakTypeTraces) {
  auto f = jit([](const Array& x) { return x + 1; });
  f(ones({2}));
  f(ones({2}, DType::Int32));
  EXPECT_EQ(f.trace_count(), 2);
  EXPECT_EQ(f(Array(1.0)).item<double>(), 2.0);  // a weakly typed scalar
  EXPECT_EQ(f.trace_count(), 3);
  f(Array(1.0f));  // a strongly typed float32 scalar is a different signature
  EXPECT_EQ(f.trace_count(), 4);
}

TEST(JitCache, ChangedStaticArgumentRecompiles) {
  int traced = 0;
  auto f = jit(
      [&](const Array& x, int power) {
        ++traced;
        Array r = x;
        for (int i = 1; i < power; ++i) r = r * x;
        return r;
      },
      {.static_argnums = {1}});
  Array x = Array({2.0, 3.0});
  expect_same(f(x, 2), Array({4.0, 9.0}));
  expect_same(f(x, 2), Array({4.0, 9.0}));
  EXPECT_EQ(traced, 1);
  expect_same(f(x, 3), Array({8.0, 27.0}));
  EXPECT_EQ(traced, 2);
  expect_same(f(x, 2), Array({4.0, 9.0}));
  EXPECT_EQ(traced, 2);
  EXPECT_EQ(f.trace_count(), 2);
}

TEST(JitCache, NonArrayArgumentsAreStatic) {
  auto f = jit([](const Array& x, const std::string& op, double scale) {
    return (op == "sin" ? sin(x) : cos(x)) * scale;
  });
  Array x = Array({0.5, 1.0});
  expect_same(f(x, std::string("sin"), 2.0), sin(x) * 2.0);
  expect_same(f(x, std::string("cos"), 2.0), cos(x) * 2.0);
  expect_same(f(x, std::string("cos"), 3.0), cos(x) * 3.0);
  expect_same(f(x, std::string("cos"), 3.0), cos(x) * 3.0);
  EXPECT_EQ(f.trace_count(), 3);
}

TEST(JitCache, ContainerStructureIsPartOfTheSignature) {
  auto f = jit([](const std::vector<Array>& xs) {
    Array s = zeros({2});
    for (auto& x : xs) s = s + x;
    return s;
  });
  Array a = Array({1.0, 2.0}), b = Array({10.0, 20.0});
  expect_same(f(std::vector<Array>{a}), a);
  expect_same(f(std::vector<Array>{a, b}), Array({11.0, 22.0}));
  expect_same(f(std::vector<Array>{b, a}), Array({11.0, 22.0}));
  EXPECT_EQ(f.trace_count(), 2);
}

TEST(JitCache, StaticArgnumsOnAnArrayIsAnError) {
  auto f = jit([](const Array& x) { return x; }, {.static_argnums = {0}});
  try {
    f(ones({2}));
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("static_argnums lists argument 0"));
    EXPECT_THAT(e.what(), HasSubstr("holds arrays"));
  }
}

TEST(JitCache, ResultsOfEarlierCallsAreNotOverwritten) {
  auto f = jit([](const Array& x) { return exp(x) * 2.0 + 1.0; });
  Array x1 = random_f32({100}, 1), x2 = random_f32({100}, 2);
  Array r1 = f(x1);
  Array r2 = f(x2);
  expect_same(r1, exp(x1) * 2.0 + 1.0);
  expect_same(r2, exp(x2) * 2.0 + 1.0);
}

TEST(JitCache, ConcurrentCallsFromThreads) {
  auto f = jit([](const Array& x) { return tanh(matmul(x, transpose(x))) + sum(x); });
  std::vector<Array> xs, want, got(4);
  for (int i = 0; i < 4; ++i) {
    xs.push_back(random_f32({16, 8}, 10 + i));
    want.push_back(tanh(matmul(xs[i], transpose(xs[i]))) + sum(xs[i]));
  }
  f(xs[0]);  // compile first; the threads then share the executable
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) got[i] = f(xs[i]);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) expect_same(got[i], want[i], 1e-5);
  EXPECT_EQ(f.trace_count(), 1);
}

TEST(JitCache, VmapOfJitDoesNotRetraceOnLaterCalls) {
  int traced = 0;
  auto f = jit([&](const Array& x) {
    ++traced;
    return x * x;
  });
  auto g = vmap(f);
  expect_same(g(Array(std::vector<float>{1, 2, 3, 4}, {2, 2})),
              Array(std::vector<float>{1, 4, 9, 16}, {2, 2}));
  expect_same(g(Array(std::vector<float>{5, 6, 7, 8}, {2, 2})),
              Array(std::vector<float>{25, 36, 49, 64}, {2, 2}));
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(f.trace_count(), 1);
}

TEST(JitCache, ZeroArgumentsAndZeroSizedArrays) {
  auto c = jit([]() { return arange(4).astype(DType::Float32) * 2.0; });
  expect_same(c(), Array({0.0, 2.0, 4.0, 6.0}));
  auto f = jit([](const Array& x) { return sum(exp(x), std::vector<int>{1}); });
  Array out = f(zeros({0, 3}));
  EXPECT_EQ(out.shape(), Shape({0}));
  expect_same(f(zeros({2, 0})), zeros({2}));
}

// ---- composition ------------------------------------------------------------------------------
Array layer(const Array& x, const Array& w) { return tanh(matmul(x, w)) + sum(x); }

// Per-example reference: apply `layer` to each row of x.
Array rowwise_layer(const Array& x, const Array& w) {
  std::vector<Array> rows;
  for (int64_t i = 0; i < x.shape()[0]; ++i) rows.push_back(layer(x[i], w));
  return stack(rows);
}

TEST(JitCompose, JitOfVmap) {
  Array x = random_f32({6, 4}, 1), w = random_f32({4, 3}, 2);
  int traced = 0;
  auto f = jit(vmap(
      [&](const Array& a, const Array& b) {
        ++traced;
        return layer(a, b);
      },
      {0, none}));
  expect_same(f(x, w), rowwise_layer(x, w), 1e-5);
  Array x2 = random_f32({6, 4}, 3);
  expect_same(f(x2, w), rowwise_layer(x2, w), 1e-5);
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(f.trace_count(), 1);
  Program p = make_jaxpr(vmap(layer, {0, none}))(x, w);
  EXPECT_THAT(p.str(), HasSubstr("dot_general"));
  EXPECT_THAT(p.str(), HasSubstr("tanh"));
}

TEST(JitCompose, VmapOfVmap) {
  Array x = random_f32({2, 6, 4}, 3), w = random_f32({4, 3}, 4);
  Array out = vmap(vmap(layer, {0, none}), {0, none})(x, w);
  ASSERT_EQ(out.shape(), Shape({2, 6, 3}));
  for (int i = 0; i < 2; ++i) expect_same(out[i], rowwise_layer(x[i], w), 1e-5);
  Program p = make_jaxpr(vmap(vmap(layer, {0, none}), {0, none}))(x, w);
  EXPECT_THAT(p.str(), HasSubstr("tanh"));
  EXPECT_THAT(p.str(), HasSubstr("reduce_sum"));
}

TEST(JitCompose, VmapOfJit) {
  Array x = random_f32({6, 4}, 5), w = random_f32({4, 3}, 6);
  auto jl = jit(layer);
  expect_same(vmap(jl, {0, none})(x, w), rowwise_layer(x, w), 1e-5);
  Program p = make_jaxpr(vmap(jl, {0, none}))(x, w);
  EXPECT_THAT(p.str(), HasSubstr("tanh"));
}

TEST(JitCompose, JitOfJit) {
  Array x = random_f32({6, 4}, 7), w = random_f32({4, 3}, 8);
  auto inner = jit(layer);
  auto outer = jit([&](const Array& a, const Array& b) { return inner(a, b) * 2.0; });
  expect_same(outer(x, w), layer(x, w) * 2.0, 1e-5);
  expect_same(outer(x, w), layer(x, w) * 2.0, 1e-5);
  EXPECT_EQ(outer.trace_count(), 1);
  Program p = make_jaxpr(outer)(x, w);
  EXPECT_THAT(p.str(), HasSubstr("dot_general"));
  EXPECT_THAT(p.str(), HasSubstr("mul"));
}

TEST(JitCompose, JitOfVmapOfJitOfVmap) {
  Array x = random_f32({2, 5, 4}, 9), w = random_f32({4, 3}, 10);
  auto f = jit(vmap(jit(vmap(layer, {0, none})), {0, none}));
  Array out = f(x, w);
  for (int i = 0; i < 2; ++i) expect_same(out[i], rowwise_layer(x[i], w), 1e-5);
}

TEST(JitCompose, MakeJaxprOfJitShowsTheOps) {
  Program p = make_jaxpr(jit([](const Array& x) { return exp(x) + 1.0; }))(ones({3}));
  auto names = primitive_names(p);
  EXPECT_THAT(names, ::testing::Contains("exp"));
  EXPECT_THAT(names, ::testing::Contains("add"));
}

// ---- closures ---------------------------------------------------------------------------------
TEST(JitClosure, CapturesAConcreteArray) {
  Array w = random_f32({3, 3}, 11);
  auto f = jit([&](const Array& x) { return matmul(x, w); });
  Array x = random_f32({2, 3}, 12);
  expect_same(f(x), matmul(x, w), 1e-6);
  Program p = make_jaxpr([&](const Array& v) { return matmul(v, w); })(x);
  EXPECT_EQ(p.inputs.size(), 1u);  // the captured array is a constant, not an input
}

TEST(JitClosure, VmapOfJitCapturingTheOuterTracer) {
  Array xs = Array({1.0, 2.0, 3.0});
  Array ys = Array({10.0, 20.0});
  Array out =
      vmap([&](const Array& x) { return jit([&](const Array& y) { return x * y; })(ys); })(xs);
  ASSERT_EQ(out.shape(), Shape({3, 2}));
  auto v = out.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(v[i * 2 + j], (i + 1) * 10.0f * (j + 1));
}

TEST(JitClosure, VmapOfOneJitCapturingTheOuterTracerTwice) {
  // The same Jitted object used under two vmaps: captured tracers must not be cached.
  Array ones3 = ones({3});
  auto run = [&](const Array& xs) {
    return vmap([&](const Array& x) { return jit([&](const Array& y) { return x * y; })(ones3); })(
        xs);
  };
  expect_same(run(Array({1.0, 2.0})), Array(std::vector<float>{1, 1, 1, 2, 2, 2}, {2, 3}));
  expect_same(run(Array({5.0, 7.0})), Array(std::vector<float>{5, 5, 5, 7, 7, 7}, {2, 3}));
}

TEST(JitClosure, SharedJittedCapturingTracersOfDifferentTraces) {
  Array* captured = nullptr;
  Array ys = Array({1.0, 2.0});
  auto inner = jit([&](const Array& y) { return *captured + y; });
  auto outer = [&](const Array& x) {
    Array t = x * 3.0;
    captured = &t;
    return inner(ys);
  };
  expect_same(vmap(outer)(Array({1.0, 2.0})), Array(std::vector<float>{4, 5, 7, 8}, {2, 2}));
  expect_same(vmap(outer)(Array({0.0, 1.0})), Array(std::vector<float>{1, 2, 4, 5}, {2, 2}));
}

TEST(JitClosure, InnerJitReturnsTheCapturedTracer) {
  Array xs = Array({1.0, 2.0});
  Array out =
      vmap([&](const Array& x) { return jit([&](const Array&) { return x; })(ones({3})); })(xs);
  expect_same(out, xs);
}

TEST(JitClosure, JitInsideJitCapturingTheOuterTracer) {
  auto f = jit([](const Array& x) {
    Array t = x * 2.0;
    return jit([&](const Array& y) { return t + y; })(x);
  });
  expect_same(f(Array({1.0, 2.0})), Array({3.0, 6.0}));
}

TEST(JitClosure, EscapedTracerIsAnError) {
  Array leaked;
  jit([&](const Array& x) {
    leaked = x * 2.0;
    return x;
  })(ones({2}));
  try {
    (void)(leaked + 1.0);
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tracer"));
  }
}

// ---- simplification ---------------------------------------------------------------------------
TEST(JitSimplify, DeadCodeIsDropped) {
  auto fn = [](const Array& x) {
    Array unused = exp(x) * 100.0;
    (void)unused;
    return x + 1.0;
  };
  Array x = random_f32({5}, 20);
  expect_same(jit(fn)(x), x + 1.0);
  Program p = compile::simplify(make_jaxpr(fn)(x));
  EXPECT_THAT(primitive_names(p), ::testing::ElementsAre("add"));
}

TEST(JitSimplify, DuplicateSubexpressionsAreComputedOnce) {
  auto fn = [](const Array& x, const Array& y) { return exp(x) * y + exp(x) * y; };
  Array x = random_f32({5}, 21), y = random_f32({5}, 25);
  expect_same(jit(fn)(x, y), exp(x) * y * 2.0);
  Program p = compile::simplify(make_jaxpr(fn)(x, y));
  EXPECT_THAT(primitive_names(p), ::testing::ElementsAre("exp", "mul", "add"));
}

TEST(JitSimplify, ConstantSubexpressionsAreFolded) {
  auto fn = [](const Array& x) {
    Array c = exp(arange(5).astype(DType::Float32)) + 1.0;  // no dependence on x
    return x * c;
  };
  Array x = random_f32({5}, 22);
  std::vector<float> want;
  auto xv = x.to_vector<float>();
  for (int i = 0; i < 5; ++i) want.push_back(xv[i] * (std::exp(static_cast<float>(i)) + 1.0f));
  expect_same(jit(fn)(x), Array(want, {5}), 1e-6);
  Program p = compile::simplify(make_jaxpr([&](const Array& v) {
    Array c = exp(iota(DType::Float32, {5})) + 1.0;
    return v * c;
  })(x));
  EXPECT_THAT(primitive_names(p), ::testing::ElementsAre("mul"));
}

TEST(JitSimplify, OutputsThatAreInputsConstantsOrRepeated) {
  auto f = jit([](const Array& x) {
    Array e = exp(x);
    return std::make_tuple(x, e, e, full({2}, 7.0), reshape(e, {3, 1}));
  });
  Array x = Array({0.0, 1.0, 2.0});
  auto [a, b, c, d, r] = f(x);
  expect_same(a, x);
  expect_same(b, exp(x));
  expect_same(c, exp(x));
  expect_same(d, full({2}, 7.0));
  expect_same(r, reshape(exp(x), {3, 1}));
}

TEST(JitSimplify, ViewOutputsOfInputsAndOutputs) {
  auto f = jit([](const Array& x) {
    Array e = exp(x);
    Array v = reshape(e, {3, 1});
    return std::make_tuple(reshape(x, {1, 3}), e, v * 2.0, v);
  });
  Array x = Array({0.0, 1.0, 2.0});
  auto [a, b, c, d] = f(x);
  expect_same(a, reshape(x, {1, 3}));
  expect_same(b, exp(x));
  expect_same(c, reshape(exp(x), {3, 1}) * 2.0);
  expect_same(d, reshape(exp(x), {3, 1}));
}

TEST(JitSimplify, ViewsOfIntermediatesAndInputs) {
  auto fn = [](const Array& x) {
    Array a = reshape(x, {4, 3});        // a view of the input
    Array b = reshape(exp(a), {12});     // a view of an intermediate
    Array c = reshape(b * 2.0, {2, 6});  // and of another
    return transpose(c) + reshape(a, {6, 2});
  };
  Array x = random_f32({12}, 23);
  expect_same(jit(fn)(x), fn(x));
}

TEST(JitSimplify, LongChainReusesArenaCorrectly) {
  auto fn = [](const Array& x) {
    Array a = x;
    std::vector<Array> keep;
    for (int i = 0; i < 12; ++i) {
      a = sin(a) * 1.5 + static_cast<double>(i);
      if (i % 4 == 0) keep.push_back(sum(a, std::vector<int>{1}));
      if (i % 3 == 0) a = transpose(a);
    }
    Array s = a;
    for (auto& k : keep) s = s + sum(k);
    return s;
  };
  Array x = random_f32({8, 8}, 24);
  expect_same(jit(fn)(x), fn(x), 1e-5);
}

// ---- jit output equals eager output -----------------------------------------------------------
struct Case {
  const char* name;
  std::function<Array(const Array&, const Array&)> f;
};

TEST(JitMatchesEager, RangeOfFunctions) {
  Array x = random_f32({4, 6}, 30), y = random_f32({4, 6}, 31, 0.5, 2);
  Array idx = Array({3, 0, 0, 5, -1});
  std::vector<Case> cases = {
      {"elementwise chain",
       [](const Array& a, const Array& b) { return exp(a) * b - log(b) / (a * a + 1.0); }},
      {"comparisons and where",
       [](const Array& a, const Array& b) { return where(a > 0.0, a, b * -1.0); }},
      {"reductions",
       [](const Array& a, const Array& b) {
         return sum(a, std::vector<int>{0}) + max(b, std::vector<int>{0}) * mean(a);
       }},
      {"argmax", [](const Array& a, const Array&) { return argmax(a, 1); }},
      {"matmul", [](const Array& a, const Array& b) { return matmul(a, transpose(b)); }},
      {"reshape/transpose",
       [](const Array& a, const Array& b) {
         return transpose(reshape(a, {3, 8})) + reshape(transpose(b), {8, 3});
       }},
      {"take", [idx](const Array& a, const Array&) { return take(a, idx, 1); }},
      {"take_along_axis",
       [](const Array& a, const Array& b) { return take_along_axis(a, lax::argsort(b, -1), 1); }},
      {"concatenate",
       [](const Array& a, const Array& b) {
         return concatenate({a, b * 2.0, a}, 1);
       }},
      {"slice and pad",
       [](const Array& a, const Array&) {
         return pad(slice(a, {Range{1, 3}}), {{1, 1}, {0, 2}}, -1.0);
       }},
      {"cumsum", [](const Array& a, const Array&) { return cumsum(a, 1); }},
      {"softmax", [](const Array& a, const Array&) { return softmax(a); }},
      {"astype",
       [](const Array& a, const Array& b) {
         return astype(a * 10.0, DType::Int32) + astype(b, DType::Int32);
       }},
      {"random",
       [](const Array& a, const Array&) {
         return a + random::normal(random::key(3), {4, 6});
       }},
      {"scatter_add",
       [](const Array& a, const Array&) {
         return lax::gather_transpose(a, Array({0, 1, 0, 3}), {5, 6}, 0);
       }},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_same(jit(c.f)(x, y), c.f(x, y), 1e-5);
  }
}

}  // namespace
}  // namespace spmd
