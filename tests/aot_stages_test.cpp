// jit's ahead-of-time stages (JAX's jax.stages): trace -> lower -> compile, the Compiled object
// run on the compiled types and refusing others with JAX's messages, static arguments fixed at
// trace time, the stages sharing the jitted function's entry, cost_analysis against counts made
// by hand, memory_analysis against the types' bytes, and calls partitioned over a mesh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;

Array ramp(const Shape& shape, float scale = 0.25f, DType dtype = DType::Float32) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 11) * scale - 1;
  return astype(Array(v, shape), dtype);
}

using test_util::error_of;

TEST(AotStages, TraceLowerCompileRunsAsJitAndSharesItsEntry) {
  auto f = [](const Array& x, const Array& y) { return x * y + sin(x); };
  auto jf = jit(f);
  Array x = ramp({3}), y = ramp({3}, 0.5f);
  auto traced = jf.trace(x, y);
  EXPECT_THAT(traced.jaxpr().str(), HasSubstr("sin"));
  auto lowered = traced.lower();
  EXPECT_THAT(lowered.as_text(), HasSubstr("sin"));
  auto compiled = lowered.compile();
  std::vector<float> got = compiled(x, y).to_vector<float>();
  std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], xs[i] * ys[i] + std::sin(xs[i]));
  EXPECT_FALSE(compiled.as_text().empty());
  // The jitted function finds the staged entry: no second trace.
  EXPECT_EQ(jf.trace_count(), 1);
  EXPECT_EQ(jf(x, y).to_vector<float>(), got);
  EXPECT_EQ(jf.trace_count(), 1);
  // Other values of the same types run on the same compiled code.
  Array x2 = ramp({3}, 1.5f);
  EXPECT_EQ(compiled(x2, y).to_vector<float>(), jf(x2, y).to_vector<float>());
  EXPECT_EQ(jf.trace_count(), 1);
  // lower() is trace().lower().
  EXPECT_EQ(jf.lower(x, y).as_text(), lowered.as_text());
}

TEST(AotStages, CalledWithOtherTypesItFailsNamingEachMismatchAsJax) {
  auto jf = jit([](const Array& x, const Array& y) { return x + y; });
  auto compiled = jf.lower(ramp({3}), ramp({3})).compile();
  EXPECT_EQ(error_of([&] { compiled(ramp({4}), ramp({4})); }),
            "Argument types differ from the types for which this computation was compiled. The "
            "mismatches are:\nArgument 'args[0]' compiled with f32[3] and called with f32[4]\n"
            "Argument 'args[1]' compiled with f32[3] and called with f32[4]");
  EXPECT_EQ(error_of([&] { compiled(ramp({3}), ramp({3}, 1, DType::Int32)); }),
            "Argument types differ from the types for which this computation was compiled. The "
            "mismatches are:\nArgument 'args[1]' compiled with f32[3] and called with i32[3]");
  // A weak type compiles alike (JAX's typematch ignores it): a Python-scalar-like double.
  auto scalar = jf.lower(Array(1.0f), Array(2.0f)).compile();
  EXPECT_EQ(scalar(Array(3.0f), Array(4.0f)).to_vector<float>(), std::vector<float>{7.0f});
  // Six mismatches: the first five are shown.
  auto six = jit([](const std::vector<Array>& v) { return v[0]; });
  std::vector<Array> a(6, ramp({2})), b(6, ramp({5}));
  auto c6 = six.lower(a).compile();
  std::string e = error_of([&] { c6(b); });
  EXPECT_THAT(e, HasSubstr("The first 5 of 6 mismatches are:"));
  EXPECT_THAT(e, HasSubstr("Argument 'args[0][4]' compiled with f32[2] and called with f32[5]"));
  EXPECT_THAT(e, ::testing::Not(HasSubstr("args[0][5]")));
  // Another structure, and another number of arguments.
  std::string tree = error_of([&] { c6(std::vector<Array>(5, ramp({2}))); });
  EXPECT_THAT(tree, HasSubstr("does not match the input pytree it was called with"));
  EXPECT_THAT(tree, HasSubstr("args[0]: compiled with"));
  EXPECT_THAT(error_of([&] { compiled(ramp({3})); }),
              HasSubstr("compiled for 2 dynamic argument(s) and called with 1"));
  // Leaf names follow the pytree's keys.
  auto named = jit([](const std::map<std::string, Array>& p) { return p.at("w") * 2.0f; });
  auto cn = named.lower(std::map<std::string, Array>{{"b", ramp({2})}, {"w", ramp({2})}}).compile();
  EXPECT_THAT(error_of([&] { cn(std::map<std::string, Array>{{"b", ramp({2})}, {"w", ramp({3})}}); }),
              HasSubstr("Argument 'args[0]['w']' compiled with f32[2] and called with f32[3]"));
}

TEST(AotStages, StaticArgumentsAreFixedWhenTracedAndNotPassedAgain) {
  auto jf = jit([](const Array& x, int k) { return x * static_cast<float>(k); },
                {.static_argnums = {1}});
  Array x = ramp({4});
  auto by3 = jf.lower(x, 3).compile();
  auto by5 = jf.lower(x, 5).compile();
  std::vector<float> xs = x.to_vector<float>();
  std::vector<float> g3 = by3(x).to_vector<float>(), g5 = by5(x).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_FLOAT_EQ(g3[i], xs[i] * 3);
    EXPECT_FLOAT_EQ(g5[i], xs[i] * 5);
  }
  EXPECT_EQ(jf.trace_count(), 2);
  EXPECT_THAT(error_of([&] { by3(x, 3); }), HasSubstr("static arguments were fixed"));
}

TEST(AotStages, DonationThroughACompiledCall) {
  auto jf = jit([](const Array& x) { return x * 2.0f + 1.0f; }, {.donate_argnums = {0}});
  Array x = ramp({64});
  auto compiled = jf.lower(x).compile();
  MemoryAnalysis m = compiled.memory_analysis();
  EXPECT_EQ(m.argument_size_in_bytes, 64 * 4);
  EXPECT_EQ(m.output_size_in_bytes, 64 * 4);
  EXPECT_EQ(m.alias_size_in_bytes, 64 * 4);  // the output may take x's buffer
  std::vector<float> xs = x.to_vector<float>();
  std::vector<float> got = compiled(x).to_vector<float>();
  EXPECT_TRUE(x.is_deleted());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_FLOAT_EQ(got[i], xs[i] * 2 + 1);
}

TEST(AotStages, CostAnalysisCountsAsXla) {
  // exp of 10 floats: 10 transcendentals, no flops, 40 bytes read and 40 written.
  CostAnalysis e = jit([](const Array& x) { return exp(x); }).lower(ramp({10})).cost_analysis();
  EXPECT_EQ(e.flops, 0);
  EXPECT_EQ(e.transcendentals, 10);
  EXPECT_EQ(e.bytes_accessed, 80);
  // A (4,3) @ (3,5) product: 2*4*5*3 flops; 12 + 15 floats read, 20 written.
  CostAnalysis d = jit([](const Array& a, const Array& b) { return matmul(a, b); })
                       .lower(ramp({4, 3}), ramp({3, 5}))
                       .compile()
                       .cost_analysis();
  EXPECT_EQ(d.flops, 120);
  EXPECT_EQ(d.transcendentals, 0);
  EXPECT_EQ(d.bytes_accessed, (12 + 15 + 20) * 4);
  // A row sum of (6, 7) and an add of its (6,) result to itself: 42 + 6 flops.
  CostAnalysis r = jit([](const Array& a) {
                     Array s = sum(a, {1});
                     return s + s;
                   })
                       .lower(ramp({6, 7}))
                       .cost_analysis();
  EXPECT_EQ(r.flops, 42 + 6);
  EXPECT_EQ(r.bytes_accessed, (42 + 6) * 4 + (6 + 6 + 6) * 4);
}

TEST(AotStages, MemoryAnalysisOfTheBufferPlan) {
  auto jf = jit([](const Array& a, const Array& b) {
    Array h = tanh(matmul(a, b));  // (16, 32) intermediate
    return matmul(h, transpose(b));
  });
  auto c = jf.lower(ramp({16, 8}), ramp({8, 32})).compile();
  MemoryAnalysis m = c.memory_analysis();
  EXPECT_EQ(m.argument_size_in_bytes, (16 * 8 + 8 * 32) * 4);
  EXPECT_EQ(m.output_size_in_bytes, 16 * 8 * 4);
  EXPECT_EQ(m.alias_size_in_bytes, 0);
  EXPECT_GE(m.temp_size_in_bytes, 16 * 32 * 4);  // at least the intermediate h
}

TEST(AotStages, PartitionedCallOverAMesh) {
  set_cpu_device_count(4);
  Mesh mesh = make_mesh({4}, {"x"});
  Array x = device_put(ramp({8, 4}), NamedSharding(mesh, P("x")));
  auto jf = jit([](const Array& v) { return sum(v * v, {0}); });
  auto lowered = jf.lower(x);
  EXPECT_THAT(lowered.as_text(), HasSubstr("the program each device of"));
  EXPECT_THAT(lowered.as_text(), HasSubstr("psum"));
  auto compiled = lowered.compile();
  std::vector<float> got = compiled(x).to_vector<float>();
  std::vector<float> h = ramp({8, 4}).to_vector<float>();
  for (int j = 0; j < 4; ++j) {
    float want = 0;
    for (int i = 0; i < 8; ++i) want += h[i * 4 + j] * h[i * 4 + j];
    EXPECT_FLOAT_EQ(got[static_cast<size_t>(j)], want);
  }
  // One device's part: a (2, 4) block.
  EXPECT_EQ(compiled.memory_analysis().argument_size_in_bytes, 2 * 4 * 4);
  // Another layout of the same type: JAX's sharding mismatch.
  Array y = device_put(ramp({8, 4}), NamedSharding(mesh, P(none, "x")));
  std::string e = error_of([&] { compiled(y); });
  EXPECT_THAT(e, HasSubstr("do not match the sharding(s) the computation was compiled with"));
  EXPECT_THAT(e, HasSubstr("Argument 'args[0]' of type f32[8,4] compiled with"));
  EXPECT_THAT(error_of([&] { compiled(ramp({8, 4})); }), HasSubstr("held whole"));
}

TEST(AotStages, ShardMapInsideJitStages) {
  set_cpu_device_count(4);
  Mesh mesh = make_mesh({4}, {"i"});
  auto body = [](const Array& b) { return psum(b * 2.0f, "i"); };
  auto jf = jit([&](const Array& v) { return shard_map(body, mesh, P("i"), P())(v); });
  Array x = ramp({8});
  auto compiled = jf.lower(x).compile();
  std::vector<float> h = x.to_vector<float>(), got = compiled(x).to_vector<float>();
  ASSERT_EQ(got.size(), 2u);
  for (int j = 0; j < 2; ++j) {
    float want = 0;
    for (int d = 0; d < 4; ++d) want += 2 * h[static_cast<size_t>(d * 2 + j)];
    EXPECT_FLOAT_EQ(got[static_cast<size_t>(j)], want);
  }
}

TEST(AotStages, PmapStagesCompileThePerReplicaProgramOnce) {
  set_cpu_device_count(4);
  auto pf = pmap([](const Array& x) { return psum(x * 2.0f, "i") + x; }, "i");
  Array x = ramp({4, 3});
  auto lowered = pf.lower(x);
  EXPECT_THAT(lowered.as_text(), HasSubstr("replicas of pmap axis 'i'"));
  EXPECT_THAT(lowered.as_text(), HasSubstr("psum"));
  auto compiled = lowered.compile();
  std::vector<float> h = x.to_vector<float>(), got = compiled(x).to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 3; ++j) {
      float s = 0;
      for (int q = 0; q < 4; ++q) s += h[static_cast<size_t>(q * 3 + j)] * 2.0f;
      EXPECT_FLOAT_EQ(got[static_cast<size_t>(r * 3 + j)], s + h[static_cast<size_t>(r * 3 + j)]);
    }
  EXPECT_EQ(pf(x).to_vector<float>(), got);
  EXPECT_EQ(pf.trace_count(), 1);  // the stages and the call share one trace
  EXPECT_EQ(compiled.memory_analysis().argument_size_in_bytes, 3 * 4);  // one replica's row
  EXPECT_EQ(compiled.cost_analysis().flops, 3 + 3);  // x * 2 and + x on a row (psum: no flops)
  EXPECT_THAT(error_of([&] { compiled(ramp({4, 5})); }),
              HasSubstr("Argument 'args[0]' compiled with f32[4,3] and called with f32[4,5]"));
}

}  // namespace
}  // namespace spmd
