// Type promotion with weak types: every pair of JAX's binary promotion table (docs.jax.dev,
// "Type promotion semantics") restricted to the types spmd has — b1, u4, i4, i8, f4, f8 and the
// weak i* (a C++ int) and f* (a C++ double) — including whether the result is weak, through
// several ops, eagerly and under jit and vmap; and which ops keep or drop weakness.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spmd/spmd.h"

namespace spmd {
namespace {

// The columns of JAX's table that spmd has. W_INT and W_FLOAT are the weak i* and f*.
enum T { B1, U4, I4, I8, F4, F8, W_INT, W_FLOAT };
const char* const kNames[] = {"b1", "u4", "i4", "i8", "f4", "f8", "i*", "f*"};
constexpr int kCount = 8;

// jnp.promote_types on those columns, copied from JAX's documented table.
const T kTable[kCount][kCount] = {
    /* b1 */ {B1, U4, I4, I8, F4, F8, W_INT, W_FLOAT},
    /* u4 */ {U4, U4, I8, I8, F4, F8, U4, W_FLOAT},
    /* i4 */ {I4, I8, I4, I8, F4, F8, I4, W_FLOAT},
    /* i8 */ {I8, I8, I8, I8, F4, F8, I8, W_FLOAT},
    /* f4 */ {F4, F4, F4, F4, F4, F8, F4, F4},
    /* f8 */ {F8, F8, F8, F8, F8, F8, F8, F8},
    /* i* */ {W_INT, U4, I4, I8, F4, F8, W_INT, W_FLOAT},
    /* f* */ {W_FLOAT, W_FLOAT, W_FLOAT, W_FLOAT, F4, F8, W_FLOAT, W_FLOAT},
};

// An operand of type t: a strong (2,) array, or a C++ scalar for the weak types.
Array operand(T t) {
  switch (t) {
    case B1:
      return Array(std::vector<bool>{true, false}, Shape{2});
    case U4:
      return astype(Array({1, 2}), uint32);
    case I4:
      return Array({1, 2});
    case I8:
      return astype(Array({1, 2}), int64);
    case F4:
      return Array({1.0, 2.0});
    case F8:
      return Array({1.0, 2.0}, float64);
    case W_INT:
      return Array(3);
    case W_FLOAT:
      return Array(0.5);
  }
  return Array();
}

// The dtype a result of table type r has. A weak result takes the default type of its kind
// (int32, float32), except that two C++ scalars meeting at f* keep the double's float64.
struct Want {
  DType dtype;
  bool weak;
};
Want want_of(T r, T a, T b) {
  switch (r) {
    case B1:
      return {bool_, false};
    case U4:
      return {uint32, false};
    case I4:
      return {int32, false};
    case I8:
      return {int64, false};
    case F4:
      return {float32, false};
    case F8:
      return {float64, false};
    case W_INT:
      return {int32, true};
    case W_FLOAT: {
      bool both_weak = (a == W_INT || a == W_FLOAT) && (b == W_INT || b == W_FLOAT);
      return {both_weak ? float64 : float32, true};
    }
  }
  return {bool_, false};
}

std::string pair_name(int i, int j) { return std::string(kNames[i]) + " with " + kNames[j]; }

void expect_type(const Array& r, Want w, const std::string& what) {
  EXPECT_EQ(r.dtype(), w.dtype) << what << ": got " << dtype_name(r.dtype());
  EXPECT_EQ(r.weak_type(), w.weak) << what;
}

TEST(PromotionTable, TheTableIsSymmetric) {
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < kCount; ++j) EXPECT_EQ(kTable[i][j], kTable[j][i]) << pair_name(i, j);
}

TEST(PromotionTable, PromoteMatchesJaxForEveryPair) {
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < kCount; ++j) {
      Array a = operand(static_cast<T>(i)), b = operand(static_cast<T>(j));
      TypeInfo got = promote({a.dtype(), a.weak_type()}, {b.dtype(), b.weak_type()});
      Want w = want_of(kTable[i][j], static_cast<T>(i), static_cast<T>(j));
      EXPECT_EQ(got.dtype, w.dtype) << pair_name(i, j) << ": got " << dtype_name(got.dtype);
      EXPECT_EQ(got.weak, w.weak) << pair_name(i, j);
    }
}

TEST(PromotionTable, AddMultiplyMaximumAndWhereFollowTheTable) {
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < kCount; ++j) {
      T a = static_cast<T>(i), b = static_cast<T>(j);
      Want w = want_of(kTable[i][j], a, b);
      Array x = operand(a), y = operand(b);
      expect_type(add(x, y), w, "add " + pair_name(i, j));
      expect_type(multiply(x, y), w, "multiply " + pair_name(i, j));
      expect_type(maximum(x, y), w, "maximum " + pair_name(i, j));
      expect_type(where(Array(true), x, y), w, "where " + pair_name(i, j));
    }
}

TEST(PromotionTable, JitAndVmapGiveTheEagerTypes) {
  auto f = jit([](const Array& x, const Array& y) { return x * y; });
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < kCount; ++j) {
      T a = static_cast<T>(i), b = static_cast<T>(j);
      Want w = want_of(kTable[i][j], a, b);
      expect_type(f(operand(a), operand(b)), w, "jit " + pair_name(i, j));
      // vmap over a (2,) strong operand; a weak scalar is broadcast (in_axes none).
      if (a != W_INT && a != W_FLOAT) {
        Array r = vmap([](const Array& x, const Array& y) { return x * y; }, {0, none})(operand(a),
                                                                                        operand(b));
        EXPECT_EQ(r.dtype(), w.dtype) << "vmap " << pair_name(i, j);
        EXPECT_EQ(r.weak_type(), w.weak) << "vmap " << pair_name(i, j);
      }
    }
}

TEST(PromotionWeak, BoolPlusIntIsAWeakInt32WithTheSums) {
  Array r = Array(std::vector<bool>{true, false, true}, Shape{3}) + 1;
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_TRUE(r.weak_type());
  EXPECT_EQ(r.to_vector<int>(), (std::vector<int>{2, 1, 2}));
  // Weak, so a later strong operand decides the type: (b + 1) with an int64 array is int64,
  // with a uint32 array uint32, with a float32 array float32.
  EXPECT_EQ((r + astype(Array({1, 1, 1}), int64)).dtype(), int64);
  EXPECT_EQ((r + astype(Array({1, 1, 1}), uint32)).dtype(), uint32);
  EXPECT_EQ((r * Array({1.0, 1.0, 1.0})).dtype(), float32);
  EXPECT_FALSE((r + astype(Array({1, 1, 1}), int64)).weak_type());
}

TEST(PromotionWeak, IntArrayTimesDoubleIsAWeakFloat32) {
  Array r = Array({1, 2, -3}) * 2.5;
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_TRUE(r.weak_type());
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{2.5f, 5.0f, -7.5f}));
  EXPECT_EQ((r + Array({0.0, 0.0, 0.0}, float64)).dtype(), float64);  // f* with f8
  // True division promotes first (i8 with i* is a strong i8), then goes to the default float:
  // jnp.arange(2) / 2 is a strong float32; with 2.0 (i8 with f*) it is weak.
  EXPECT_EQ((astype(Array({1, 2}), int64) / 2).dtype(), float32);
  EXPECT_FALSE((astype(Array({1, 2}), int64) / 2).weak_type());
  EXPECT_TRUE((astype(Array({1, 2}), int64) / 2.0).weak_type());
}

TEST(PromotionWeak, StrongScalarsAreNotWeak) {
  // float, int64_t and bool C++ scalars are strong, as numpy scalars are in JAX.
  Array r = Array({1, 2}) + 1.0f;
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_FALSE(r.weak_type());
  EXPECT_FALSE((Array(true) + Array(int64_t{1})).weak_type());
  EXPECT_EQ((Array(true) + Array(int64_t{1})).dtype(), int64);
}

TEST(PromotionWeak, ComparisonsGiveStrongBool) {
  for (const Array& r :
       {Array(1) < Array(2), equal(Array(2.0), Array(2.0)), not_equal(Array(1), Array(0.5)),
        greater_equal(Array(3), 1), less(Array({1.0, 2.0}), 1.5)}) {
    EXPECT_EQ(r.dtype(), bool_);
    EXPECT_FALSE(r.weak_type());
  }
  // Under jit too.
  Array j = jit([](const Array& a) { return a > 0.5; })(Array(1.0));
  EXPECT_EQ(j.dtype(), bool_);
  EXPECT_FALSE(j.weak_type());
}

TEST(PromotionWeak, UnaryOpsAndWhereKeepWeakness) {
  EXPECT_TRUE(sin(Array(2.0)).weak_type());
  EXPECT_EQ(sin(Array(2.0)).dtype(), float64);
  EXPECT_TRUE((-Array(3)).weak_type());
  EXPECT_EQ(exp(Array(1)).dtype(), float32);  // an int goes to the default float
  EXPECT_TRUE(exp(Array(1)).weak_type());
  Array w = where(Array(true), 1, 2.0);  // i* with f*: f*
  EXPECT_TRUE(w.weak_type());
  EXPECT_EQ(w.item<double>(), 1.0);
  Array x = Array({-1.0, 2.0});
  Array r = where(x > 0.0, x, 0.0);  // f4 with f*: f4
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_FALSE(r.weak_type());
}

TEST(PromotionWeak, ScalarTimesArrayTakesTheArrayType) {
  for (DType t : {float32, float64}) {
    Array x = astype(Array({1.0, 2.0}), t);
    Array r = Array(2.0) * x;
    EXPECT_EQ(r.dtype(), t);
    EXPECT_FALSE(r.weak_type());
  }
  EXPECT_FALSE(astype(Array(2.0), float32).weak_type());  // astype makes it strong
}

}  // namespace
}  // namespace spmd
