// pbroadcast, all_gather_invariant and ragged_all_to_all (spmd/collectives.h) under pmap, vmap,
// shard_map and grad, against plain loops over the replicas' values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

class CollectiveComposites : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

constexpr int kA = 4;  // replicas

std::vector<float> to_floats(const Array& a) { return astype(a, DType::Float32).to_vector<float>(); }

TEST_F(CollectiveComposites, PbroadcastCopiesTheSourceToEveryReplica) {
  std::vector<float> v(kA * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 2.0f;
  const Array x(v, {kA, 3});
  for (int source : {0, 2, kA - 1}) {
    auto f = [source](const Array& r) { return pbroadcast(r, "i", source); };
    for (const Array& got : {pmap(f, "i")(x), vmap(f, 0, 0, "i")(x)}) {
      std::vector<float> g = to_floats(got);
      for (int i = 0; i < kA; ++i)
        for (int c = 0; c < 3; ++c)
          EXPECT_EQ(g[static_cast<size_t>(i * 3 + c)], v[static_cast<size_t>(source * 3 + c)])
              << "source " << source << " replica " << i;
    }
  }
  // Its gradient: every replica's value is the source's, so the source gets every cotangent.
  const Array c = Array(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {kA, 3});
  auto loss = [&](const Array& a) {
    return sum(vmap([](const Array& r) { return pbroadcast(r, "i", 1); }, 0, 0, "i")(a) * c);
  };
  std::vector<float> g = to_floats(grad(loss)(x));
  for (int i = 0; i < kA; ++i)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(g[static_cast<size_t>(i * 3 + k)], i == 1 ? 22.0f + 4.0f * static_cast<float>(k) : 0.0f);
  try {
    pmap([](const Array& r) { return pbroadcast(r, "i", kA); }, "i")(x);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("pbroadcast: source 4 is not an index of an axis of size 4"));
  }
}

TEST_F(CollectiveComposites, AllGatherInvariantGathersAndTransposesToItsOwnSlice) {
  std::vector<float> v(kA * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 1.0f;
  const Array x(v, {kA, 2});
  for (bool tiled : {false, true}) {
    auto f = [tiled](const Array& r) { return all_gather_invariant(r, "i", 0, tiled); };
    for (const Array& got : {pmap(f, "i")(x), vmap(f, 0, 0, "i")(x)}) {
      ASSERT_EQ(got.shape(), tiled ? (Shape{kA, kA * 2}) : (Shape{kA, kA, 2}));
      std::vector<float> g = to_floats(got);
      for (int i = 0; i < kA; ++i)
        for (size_t e = 0; e < v.size(); ++e) EXPECT_EQ(g[static_cast<size_t>(i) * v.size() + e], v[e]);
    }
    // The same cotangent w on every replica: each gets its own slice of w (all_gather would sum
    // the replicas' slices: kA times as much).
    std::vector<float> w(kA * 2);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f - 1.0f;
    const Array ws = broadcast_to(Array(w, tiled ? Shape{kA * 2} : Shape{kA, 2}),
                                  tiled ? Shape{kA, kA * 2} : Shape{kA, kA, 2});
    auto loss = [&](const Array& a) { return sum(vmap(f, 0, 0, "i")(a) * ws); };
    std::vector<float> g = to_floats(grad(loss)(x));
    for (size_t e = 0; e < w.size(); ++e) EXPECT_EQ(g[e], w[e]) << "tiled " << tiled << " at " << e;
  }
  // Inside shard_map, its invariant result may leave replicated (out_specs P()).
  const Mesh m = make_mesh({kA}, {"x"});
  auto whole = shard_map([](const Array& b) { return all_gather_invariant(b, "x", 0, true); }, m,
                         P("x"), P());
  EXPECT_EQ(to_floats(whole(Array(v, {kA * 2}))), v);
}

// The replicas' arguments for ragged_all_to_all: replica p sends (p + j) % 3 rows to replica j,
// its slices packed in order; replica j places the slices it receives one after the other, from
// replica 0 on, over an output of -1s.
struct Ragged {
  std::vector<std::vector<int32_t>> in_off, send, out_off, recv;
  static Ragged make() {
    Ragged r;
    r.in_off.assign(kA, std::vector<int32_t>(kA));
    r.send = r.out_off = r.recv = r.in_off;
    for (int p = 0; p < kA; ++p)
      for (int j = 0; j < kA; ++j) r.send[p][j] = (p + j) % 3;
    for (int p = 0; p < kA; ++p)
      for (int j = 1; j < kA; ++j) r.in_off[p][j] = r.in_off[p][j - 1] + r.send[p][j - 1];
    for (int j = 0; j < kA; ++j)
      for (int p = 0; p < kA; ++p) {
        r.recv[j][p] = r.send[p][j];
        r.out_off[p][j] = p == 0 ? 0 : r.out_off[p - 1][j] + r.send[p - 1][j];
      }
    return r;
  }
  static Array stacked(const std::vector<std::vector<int32_t>>& v) {
    std::vector<int32_t> flat;
    for (const auto& row : v) flat.insert(flat.end(), row.begin(), row.end());
    return Array(flat, {kA, kA});
  }
};

TEST_F(CollectiveComposites, RaggedAllToAllMovesEachSliceToItsReplica) {
  constexpr int kRows = 8, kOut = 10, kCols = 2;
  const Ragged r = Ragged::make();
  std::vector<float> ops(kA * kRows * kCols);
  for (size_t i = 0; i < ops.size(); ++i) ops[i] = static_cast<float>(i) + 0.5f;
  const Array operand(ops, {kA, kRows, kCols});
  const Array output = full({kA, kOut, kCols}, -1.0);
  // The reference: every slice copied by hand.
  std::vector<float> want(kA * kOut * kCols, -1.0f);
  for (int p = 0; p < kA; ++p)
    for (int j = 0; j < kA; ++j)
      for (int row = 0; row < r.send[p][j]; ++row)
        for (int c = 0; c < kCols; ++c)
          want[static_cast<size_t>((j * kOut + r.out_off[p][j] + row) * kCols + c)] =
              ops[static_cast<size_t>((p * kRows + r.in_off[p][j] + row) * kCols + c)];
  auto f = [](const Array& o, const Array& out, const Array& io, const Array& ss, const Array& oo,
              const Array& rs) { return ragged_all_to_all(o, out, io, ss, oo, rs, "i"); };
  const std::vector<Array> args{operand, output, Ragged::stacked(r.in_off), Ragged::stacked(r.send),
                                Ragged::stacked(r.out_off), Ragged::stacked(r.recv)};
  Array by_pmap = pmap(f, "i")(args[0], args[1], args[2], args[3], args[4], args[5]);
  Array by_vmap = vmap(f, 0, 0, "i")(args[0], args[1], args[2], args[3], args[4], args[5]);
  EXPECT_EQ(to_floats(by_pmap), want);
  EXPECT_EQ(to_floats(by_vmap), want);
  // Its gradient: a sent row gets the cotangent of the row it lands on; output's rows that were
  // written get none.
  std::vector<float> w(kA * kOut * kCols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
  const Array wa(w, {kA, kOut, kCols});
  auto loss = [&](const Array& o, const Array& out) {
    return sum(vmap(f, 0, 0, "i")(o, out, args[2], args[3], args[4], args[5]) * wa);
  };
  auto [g_operand, g_output] = grad(loss, argnums<0, 1>)(operand, output);
  std::vector<float> want_op(ops.size(), 0.0f), want_out(w);
  for (int p = 0; p < kA; ++p)
    for (int j = 0; j < kA; ++j)
      for (int row = 0; row < r.send[p][j]; ++row)
        for (int c = 0; c < kCols; ++c) {
          const size_t dst = static_cast<size_t>((j * kOut + r.out_off[p][j] + row) * kCols + c);
          want_op[static_cast<size_t>((p * kRows + r.in_off[p][j] + row) * kCols + c)] = w[dst];
          want_out[dst] = 0.0f;
        }
  EXPECT_EQ(to_floats(g_operand), want_op);
  EXPECT_EQ(to_floats(g_output), want_out);
}

TEST_F(CollectiveComposites, PsendAndPrecvMoveAMessageAlongPairs) {
  std::vector<float> v(kA * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 1.0f;
  const Array x(v, {kA, 2});
  const std::vector<std::pair<int, int>> ring{{0, 1}, {1, 2}, {2, 3}, {3, 0}}, one{{2, 0}};
  for (const auto& perm : {ring, one}) {
    auto f = [perm](const Array& r) {
      return precv(psend(r * 2.0, "i", perm), {2}, DType::Float32, "i", perm);
    };
    for (const Array& got : {pmap(f, "i")(x), vmap(f, 0, 0, "i")(x)}) {
      std::vector<float> g = to_floats(got), want(v.size(), 0.0f);
      for (auto [src, dst] : perm)
        for (int c = 0; c < 2; ++c)
          want[static_cast<size_t>(dst * 2 + c)] = 2.0f * v[static_cast<size_t>(src * 2 + c)];
      EXPECT_EQ(g, want);
    }
  }
  EXPECT_THROW(pmap([&](const Array& r) {
    return precv(psend(r, "i", ring), {3}, DType::Float32, "i", ring);
  }, "i")(x), Error);
}

TEST_F(CollectiveComposites, RaggedAllToAllRefusesMismatchedArguments) {
  auto call = [](const Array& io) {
    return pmap([&](const Array& o) {
      return ragged_all_to_all(o, o, io, io, io, io, "i");
    }, "i")(ones({kA, 8, 2}));
  };
  EXPECT_THROW(call(zeros({3}, DType::Int32)), Error);    // not a multiple of the axis size
  EXPECT_THROW(call(zeros({kA}, DType::Float32)), Error);  // not int32
  try {
    call(zeros({3}, DType::Int32));
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a positive multiple of the axis size (4)"));
  }
}

}  // namespace
}  // namespace spmd
