// jit over arrays laid out on meshes that span processes (8 global devices as 2 x 4 or 4 x 2):
// the partitioned program runs on each process's blocks only, and its results, gathered with
// process_allgather, equal the same function on one device of one process (exact for data
// movement, to float rounding where partial sums meet in another order).
#include <gmock/gmock.h>

#include <cmath>
#include <functional>

#include "mpi_harness.h"
#include "spmd/control_flow.h"
#include "spmd/error.h"
#include "spmd/multihost_utils.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using Fn = std::function<Array(const std::vector<Array>&)>;

class ShardedJitAcrossProcesses : public AcrossProcesses {};

// A 2 x 4 mesh (x, y): y inside each process, or spanning the processes.
Mesh mesh_2x4(bool spans) {
  std::vector<Device> all = devices(), order;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) order.push_back(all.at(spans ? 2 * j + i : 4 * i + j));
  return Mesh({2, 4}, {"x", "y"}, order);
}

std::vector<Mesh> meshes() {
  return {mesh_2x4(false), mesh_2x4(true), make_mesh({1, 8}, {"x", "y"}),
          make_mesh({8, 1}, {"x", "y"}), make_mesh({2, 2, 2}, {"x", "y", "z"})};
}

Array values(const Shape& shape, int seed = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(((i * 7 + seed * 13) % 17) - 8) / 8.0f;
  return Array(v, shape);
}

void expect_partitioned(const std::string& what, const Fn& f, const std::vector<Array>& host,
                        const std::vector<PartitionSpec>& specs, const Mesh& mesh, double tol) {
  const Array want = f(host);  // on this process's first device
  std::vector<Array> args;
  for (size_t i = 0; i < host.size(); ++i)
    args.push_back(device_put(host[i], NamedSharding(mesh, specs[i])));
  auto jf = jit([f](const std::vector<Array>& xs) { return f(xs); });
  const std::string label = what + " on " + mesh.str();
  Array got = jf(args);
  ASSERT_EQ(got.sharding().kind(), Sharding::Kind::Named) << label;
  Array whole = multihost_utils::process_allgather(got);
  ASSERT_EQ(whole.shape(), want.shape()) << label;
  std::vector<double> a = astype(whole, DType::Float64).to_vector<double>();
  std::vector<double> b = astype(want, DType::Float64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << label << " at " << i;
}

TEST_F(ShardedJitAcrossProcesses, ElementwiseReductionsAndShapes) {
  ASSERT_EQ(device_count(), 8);
  for (const Mesh& m : meshes()) {
    const PartitionSpec s = m.shape().size() == 3 ? P(MeshAxes{"x", "y"}, "z") : P("x", "y");
    expect_partitioned("exp(x) + x", [](const auto& v) { return exp(v[0]) + v[0]; },
                       {values({8, 16})}, {s}, m, 1e-6);
    expect_partitioned("row sums", [](const auto& v) { return sum(v[0], {1}); },
                       {values({8, 16})}, {s}, m, 1e-6);
    expect_partitioned("total", [](const auto& v) { return sum(v[0]); }, {values({8, 16})}, {s},
                       m, 1e-6);
    expect_partitioned("transpose of a reshape",
                       [](const auto& v) { return transpose(reshape(v[0], {2, 4, 16})); },
                       {values({8, 16})}, {s}, m, 0);
    expect_partitioned("sort (gathered)", [](const auto& v) { return sort(v[0], 1); },
                       {values({8, 16})}, {s}, m, 0);
  }
}

TEST_F(ShardedJitAcrossProcesses, MegatronMlpAndItsGradient) {
  auto loss = [](const Array& w1, const Array& w2, const Array& x) {
    return mean(square(matmul(tanh(matmul(x, w1)), w2)));
  };
  Fn f = [loss](const std::vector<Array>& v) {
    auto [g1, g2] = grad(loss, argnums<0, 1>)(v[0], v[1], v[2]);
    return concatenate({reshape(g1, {-1}), reshape(g2, {-1})});
  };
  for (const Mesh& m : meshes()) {
    expect_partitioned("forward", [](const auto& v) { return tanh(matmul(v[2], v[0])); },
                       {values({16, 32}), values({32, 8}, 1), values({8, 16}, 2)},
                       {P(none, "y"), P("y"), P("x")}, m, 1e-5);
    expect_partitioned("grad", f, {values({16, 32}), values({32, 8}, 1), values({8, 16}, 2)},
                       {P(none, "y"), P("y"), P("x")}, m, 1e-5);
  }
}

TEST_F(ShardedJitAcrossProcesses, ControlFlowOnBlocks) {
  for (const Mesh& m : meshes()) {
    const PartitionSpec s = m.shape().size() == 3 ? P(MeshAxes{"x", "y"}, "z") : P("x", "y");
    expect_partitioned("while_loop with a global predicate", [](const auto& v) {
      return lax::while_loop([](const Array& c) { return sum(abs(c)) < 500.0; },
                             [](const Array& c) { return c * 2.0 + 0.125; }, v[0]);
    }, {values({8, 16})}, {s}, m, 1e-6);
    expect_partitioned("cond", [](const auto& v) {
      return lax::cond(sum(v[0]) > 0.0, [](const Array& a) { return a * 2.0; },
                       [](const Array& a) { return -a; }, v[0]);
    }, {values({8, 16})}, {s}, m, 0);
    expect_partitioned("rnn scan and its gradient", [](const auto& v) {
      auto rnn = [](const Array& w, const Array& xs) {
        auto [h, ys] = lax::scan([&](const Array& c, const Array& x) {
          Array n = tanh(matmul(c, w) + x);
          return std::pair(n, sum(n, {1}));
        }, zeros({8, 16}), xs);
        return sum(h) + sum(ys) * 0.5;
      };
      return grad(rnn)(v[0], v[1]);
    }, {values({16, 16}, 3) * 0.25, values({4, 8, 16}, 4)}, {P(none, "y"), P(none, "x")}, m, 1e-5);
  }
}

TEST_F(ShardedJitAcrossProcesses, ReshardInsideJitAndOutShardings) {
  for (const Mesh& m : meshes()) {
    JitOptions o;
    o.out_shardings = {NamedSharding(m, P("y"))};
    auto f = jit(
        [&](const Array& a) { return reshard(a * 2.0, NamedSharding(m, P(none, "x"))) + 1.0; },
        o);
    Array x = device_put(values({8, 16}), NamedSharding(m, P("x", "y")));
    Array y = f(x);
    EXPECT_EQ(y.sharding().named().spec(), P("y"));
    Array whole = multihost_utils::process_allgather(y);
    EXPECT_EQ(whole.to_vector<float>(), (values({8, 16}) * 2.0 + 1.0).to_vector<float>());
  }
}

}  // namespace
}  // namespace spmd

int main(int argc, char** argv) { return spmd::run_tests_across_processes(argc, argv); }
