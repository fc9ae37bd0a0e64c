// Arrays: construction, metadata, host copies, creation functions and JAX-style printing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace {

using spmd::test_util::error_of;

using spmd::Array;
using spmd::DType;
using spmd::Shape;

// ---- construction and metadata ---------------------------------------------------------------

TEST(ArrayConstruct, FromFloatVectorKeepsShapeAndValues) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Array a(v, Shape{2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_FALSE(a.weak_type());
  EXPECT_EQ(a.nbytes(), 6 * sizeof(float));
  EXPECT_EQ(a.to_vector<float>(), v);
}

TEST(ArrayConstruct, VectorElementTypeGivesDtype) {
  EXPECT_EQ(Array(std::vector<double>{1, 2}, Shape{2}).dtype(), DType::Float64);
  EXPECT_EQ(Array(std::vector<int32_t>{1, 2}, Shape{2}).dtype(), DType::Int32);
  EXPECT_EQ(Array(std::vector<int64_t>{1, 2}, Shape{2}).dtype(), DType::Int64);
  EXPECT_EQ(Array(std::vector<uint32_t>{1, 2}, Shape{2}).dtype(), DType::UInt32);
  EXPECT_EQ(Array(std::vector<bool>{true, false}, Shape{2}).dtype(), DType::Bool);
}

TEST(ArrayConstruct, BoolVectorRoundTrips) {
  std::vector<bool> v = {true, false, false, true};
  EXPECT_EQ(Array(v, Shape{2, 2}).to_vector<bool>(), v);
}

TEST(ArrayConstruct, Int64ExtremesRoundTrip) {
  std::vector<int64_t> v = {std::numeric_limits<int64_t>::min(), -1, 0,
                            std::numeric_limits<int64_t>::max()};
  EXPECT_EQ(Array(v, Shape{4}).to_vector<int64_t>(), v);
}

TEST(ArrayConstruct, SizeMismatchNamesBothCounts) {
  std::string msg = error_of([] { Array(std::vector<float>{1, 2, 3, 4, 5}, Shape{2, 3}); });
  EXPECT_NE(msg.find("expected 6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 5"), std::string::npos) << msg;
}

TEST(ArrayConstruct, NegativeDimensionIsAnError) {
  float x = 0;
  std::string msg = error_of([&] { Array(&x, Shape{-1}, DType::Float32); });
  EXPECT_NE(msg.find("non-negative"), std::string::npos) << msg;
}

TEST(ArrayConstruct, RawPointerIsCopied) {
  int32_t buf[3] = {7, 8, 9};
  Array a(buf, Shape{3}, DType::Int32);
  buf[0] = 100;
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
}

TEST(ArrayConstruct, DoubleListDefaultsToFloat32) {
  Array a({1.5, 2.5, -3.0});
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, -3.0f}));
}

TEST(ArrayConstruct, IntListDefaultsToInt32) {
  Array a({4, -5, 6});
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{4, -5, 6}));
}

TEST(ArrayConstruct, ListWithExplicitDtypeConverts) {
  Array a({0.1, 0.2}, DType::Float64);
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  Array b({1, 0, 3}, DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(ArrayConstruct, CppScalarsAreRankZero) {
  struct Case {
    Array a;
    DType dtype;
    bool weak;
  };
  std::vector<Case> cases = {{Array(2.5), DType::Float64, true},
                             {Array(3), DType::Int32, true},
                             {Array(2.5f), DType::Float32, false},
                             {Array(int64_t{5}), DType::Int64, false},
                             {Array(true), DType::Bool, false}};
  for (const auto& c : cases) {
    EXPECT_EQ(c.a.ndim(), 0);
    EXPECT_EQ(c.a.size(), 1);
    EXPECT_TRUE(c.a.shape().empty());
    EXPECT_EQ(c.a.dtype(), c.dtype);
    EXPECT_EQ(c.a.weak_type(), c.weak);
  }
  EXPECT_EQ(Array(2.5).item<double>(), 2.5);
  EXPECT_EQ(Array(3).item<int32_t>(), 3);
  EXPECT_EQ(Array(int64_t{1} << 40).item<int64_t>(), int64_t{1} << 40);
  EXPECT_TRUE(Array(true).item<bool>());
}

TEST(ArrayConstruct, EmptyHandleIsInvalidAndThrowsOnUse) {
  Array a;
  EXPECT_FALSE(a.valid());
  EXPECT_THROW(a.shape(), spmd::Error);
  EXPECT_THROW(a.to_vector<float>(), spmd::Error);
}

// ---- host copies -----------------------------------------------------------------------------

TEST(ArrayToVector, FloatToIntTruncatesTowardZero) {
  Array a({1.7, -2.7, 0.5, -0.5});
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 0, 0}));
}

TEST(ArrayToVector, IntToFloatAndDouble) {
  Array a({-3, 0, 16777217});
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{-3, 0, 16777217}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{-3.f, 0.f, static_cast<float>(16777217)}));
}

TEST(ArrayToVector, NumbersToBoolAreNonZero) {
  EXPECT_EQ(Array({0.0, -0.5, 2.0}).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(Array({0, 3, -1}).to_vector<bool>(), (std::vector<bool>{false, true, true}));
}

TEST(ArrayToVector, BoolToNumbersIsZeroOne) {
  Array a(std::vector<bool>{true, false}, Shape{2});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.f, 0.f}));
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(ArrayItem, SingleElementArrayOfAnyRank) {
  EXPECT_EQ(Array(std::vector<float>{4.25f}, Shape{1, 1}).item<float>(), 4.25f);
  EXPECT_EQ(Array(std::vector<float>{4.25f}, Shape{1, 1}).item<double>(), 4.25);
}

TEST(ArrayItem, NonScalarIsAnErrorNamingTheShape) {
  Array a({1.0, 2.0});
  EXPECT_THROW(a.item<float>(), spmd::Error);
  std::string msg = error_of([&] { a.item<float>(); });
  EXPECT_NE(msg.find("one element"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2,)"), std::string::npos) << msg;
}

TEST(ArrayIndex, RowAndNegativeRow) {
  Array a(std::vector<int32_t>{0, 1, 2, 3, 4, 5}, Shape{3, 2});
  EXPECT_EQ(a[1].shape(), (Shape{2}));
  EXPECT_EQ(a[1].to_vector<int32_t>(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(a[-1].to_vector<int32_t>(), (std::vector<int32_t>{4, 5}));
}

TEST(ArrayIndex, OutOfBoundsNamesIndexAndSize) {
  Array a({1.0, 2.0, 3.0});
  std::string msg = error_of([&] { a[3]; });
  EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_THROW(a[-4], spmd::Error);
}

// ---- creation functions ----------------------------------------------------------------------

TEST(ArrayCreation, ZerosOnesFull) {
  Array z = spmd::zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
  Array o = spmd::ones({4}, DType::Int64);
  EXPECT_EQ(o.dtype(), DType::Int64);
  EXPECT_EQ(o.to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  Array f = spmd::full({3, 1}, -2.5, DType::Float64);
  EXPECT_EQ(f.shape(), (Shape{3, 1}));
  EXPECT_EQ(f.to_vector<double>(), std::vector<double>(3, -2.5));
}

TEST(ArrayCreation, FullRankZero) {
  Array f = spmd::full({}, 7.0, DType::Int32);
  EXPECT_EQ(f.ndim(), 0);
  EXPECT_EQ(f.item<int32_t>(), 7);
}

TEST(ArrayCreation, LikeFunctionsKeepShapeAndDtype) {
  Array x(std::vector<int64_t>{5, 6, 7, 8}, Shape{2, 2});
  for (const Array& a : {spmd::zeros_like(x), spmd::ones_like(x), spmd::full_like(x, 9)}) {
    EXPECT_EQ(a.shape(), x.shape());
    EXPECT_EQ(a.dtype(), DType::Int64);
  }
  EXPECT_EQ(spmd::full_like(x, 9).to_vector<int64_t>(), std::vector<int64_t>(4, 9));
}

TEST(ArrayCreation, NegativeShapeIsAnError) {
  std::string msg = error_of([] { spmd::zeros({2, -3}); });
  EXPECT_NE(msg.find("(2, -3)"), std::string::npos) << msg;
}

TEST(ArrayCreation, ShapeTooLargeForMemoryIsAnError) {
  // The byte count overflows: an error, not a tiny buffer that kernels write past.
  std::string msg = error_of([] { spmd::zeros({int64_t{1} << 62}); });
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4611686018427387904,)"), std::string::npos) << msg;
  EXPECT_THROW(spmd::ones({int64_t{1} << 40, int64_t{1} << 40}), spmd::Error);
  EXPECT_THROW(spmd::full({int64_t{1} << 31, int64_t{1} << 31, 4}, 1.0, DType::Float64),
               spmd::Error);
}

TEST(ArrayCreation, ZeroDimensionMakesAnEmptyArray) {
  Array a = spmd::zeros({3, 0, 5});
  EXPECT_EQ(a.shape(), (Shape{3, 0, 5}));
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(a.nbytes(), 0u);
  EXPECT_TRUE(a.to_vector<float>().empty());
}

TEST(ArrayCreation, ArangeStopIsInt32Range) {
  Array a = spmd::arange(5);
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

// numpy: length ceil((stop - start) / step), values start + i * step.
void expect_arange(double start, double stop, double step) {
  Array a = spmd::arange(start, stop, step);
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((stop - start) / step)));
  ASSERT_EQ(a.shape(), (Shape{n})) << start << " " << stop << " " << step;
  EXPECT_EQ(a.dtype(), DType::Float32);
  auto v = a.to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_FLOAT_EQ(v[i], static_cast<float>(start + static_cast<double>(i) * step)) << i;
}

TEST(ArrayCreation, ArangeWithFloatStep) {
  expect_arange(0, 1, 0.1);    // 10 values, the last 0.9
  expect_arange(1, 2, 0.3);    // 1, 1.3, 1.6, 1.9
  expect_arange(5, 0, -1.5);   // 5, 3.5, 2, 0.5
  expect_arange(0.5, 3, 1);    // float start
  expect_arange(0, -1, 0.25);  // empty
}

TEST(ArrayCreation, ArangeIntegerArgumentsGiveInt32) {
  Array a = spmd::arange(2, 11, 3);
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{2, 5, 8}));
  EXPECT_EQ(spmd::arange(3, 3).size(), 0);
}

TEST(ArrayCreation, ArangeExplicitDtype) {
  Array a = spmd::arange(0, 4, 1, DType::Float64);
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
}

TEST(ArrayCreation, ArangeZeroStepIsAnError) { EXPECT_THROW(spmd::arange(0, 1, 0), spmd::Error); }

TEST(ArrayCreation, LinspaceWithEndpoint) {
  Array a = spmd::linspace(-1, 2, 7, true, DType::Float64);
  auto v = a.to_vector<double>();
  ASSERT_EQ(v.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(v[i], -1 + 3.0 * i / 6, 1e-15) << i;
  EXPECT_EQ(v.front(), -1.0);
  EXPECT_EQ(v.back(), 2.0);  // exactly stop
}

TEST(ArrayCreation, LinspaceWithoutEndpoint) {
  Array a = spmd::linspace(0, 1, 5, false);
  EXPECT_EQ(a.dtype(), DType::Float32);
  auto v = a.to_vector<float>();
  ASSERT_EQ(v.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(v[i], 0.2f * i) << i;
}

TEST(ArrayCreation, LinspaceDegenerateCounts) {
  EXPECT_EQ(spmd::linspace(3, 9, 1).to_vector<float>(), (std::vector<float>{3.f}));
  EXPECT_EQ(spmd::linspace(3, 9, 0).size(), 0);
  EXPECT_THROW(spmd::linspace(0, 1, -1), spmd::Error);
}

void expect_eye(int64_t n, int64_t m, int64_t k) {
  Array e = spmd::eye(n, m, k, DType::Int32);
  ASSERT_EQ(e.shape(), (Shape{n, m}));
  EXPECT_EQ(e.dtype(), DType::Int32);
  auto v = e.to_vector<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      EXPECT_EQ(v[i * m + j], j - i == k ? 1 : 0)
          << n << "x" << m << " k=" << k << " at " << i << "," << j;
}

TEST(ArrayCreation, EyeSquareAndOffsets) {
  expect_eye(3, 3, 0);
  expect_eye(3, 4, 1);   // above the diagonal, wide
  expect_eye(4, 3, -1);  // below the diagonal, tall
  expect_eye(2, 3, 5);   // offset past the edge: all zeros
  expect_eye(0, 0, 0);
}

TEST(ArrayCreation, EyeDefaultIsSquareFloat32) {
  Array e = spmd::eye(2);
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 0, 0, 1}));
}

// ---- printing --------------------------------------------------------------------------------

TEST(ArrayPrint, SmallFloat) {
  EXPECT_EQ(Array({1.0, 2.0}).str(), "Array([1., 2.], dtype=float32)");
}

TEST(ArrayPrint, FloatsAlignOnTheDecimalPoint) {
  EXPECT_EQ(Array({1.0, 2.5}).str(), "Array([1. , 2.5], dtype=float32)");
  EXPECT_EQ(Array({-1.5, 10.0, 0.25}).str(), "Array([-1.5 , 10.  ,  0.25], dtype=float32)");
}

TEST(ArrayPrint, Ints) {
  EXPECT_EQ(Array({1, 2, 3}).str(), "Array([1, 2, 3], dtype=int32)");
  EXPECT_EQ(Array({-1, 10, 100}).str(), "Array([ -1,  10, 100], dtype=int32)");
}

TEST(ArrayPrint, Bools) {
  EXPECT_EQ(Array(std::vector<bool>{true, false}, Shape{2}).str(),
            "Array([ True, False], dtype=bool)");
}

TEST(ArrayPrint, TwoDimensionsNestBrackets) {
  Array a(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{2, 3});
  EXPECT_EQ(a.str(),
            "Array([[0., 1., 2.],\n"
            "       [3., 4., 5.]], dtype=float32)");
}

TEST(ArrayPrint, Scalars) {
  EXPECT_EQ(Array(3.0f).str(), "Array(3., dtype=float32)");
  EXPECT_EQ(Array(2.5).str(), "Array(2.5, dtype=float64, weak_type=True)");
  EXPECT_EQ(Array(7).str(), "Array(7, dtype=int32, weak_type=True)");
}

TEST(ArrayPrint, StreamOperatorMatchesStr) {
  Array a({1.0, 2.0});
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), a.str());
}

TEST(ArrayPrint, LongArrayIsElided) {
  Array a = spmd::arange(2000);
  std::string s = a.str();
  EXPECT_NE(s.find("..."), std::string::npos) << s;
  for (const char* shown : {"0", "1", "2", "1997", "1998", "1999"})
    EXPECT_NE(s.find(shown), std::string::npos) << shown << " in " << s;
  EXPECT_EQ(s.find("1000"), std::string::npos) << s;
  EXPECT_EQ(s, "Array([   0,    1,    2, ..., 1997, 1998, 1999], dtype=int32)");
}

TEST(ArrayPrint, ThousandItemsAreNotElided) {
  std::string s = spmd::arange(1000).str();
  EXPECT_EQ(s.find("..."), std::string::npos);
  EXPECT_NE(s.find("500"), std::string::npos);
}

// ---- printing compared with NumPy's array2string, as jax.Array.__repr__ uses it ----------------

struct PrintCase {
  Array array;
  std::string numpy;  // a NumPy expression for the same array
};

const char* numpy_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return "np.bool_";
    case DType::Int32:
      return "np.int32";
    case DType::Int64:
      return "np.int64";
    case DType::UInt32:
      return "np.uint32";
    case DType::Float16:
      return "np.float16";
    case DType::Float32:
      return "np.float32";
    default:
      return "np.float64";
  }
}

// The same values in NumPy: exact, since every value prints with 17 significant digits.
PrintCase case_of(const Array& a) {
  std::ostringstream py;
  py.precision(17);
  py << "np.array([";
  for (double v : a.to_vector<double>()) {
    if (std::isnan(v))
      py << "np.nan,";
    else if (std::isinf(v))
      py << (v > 0 ? "np.inf," : "-np.inf,");
    else if (v == 0 && std::signbit(v))
      py << "-0.0,";
    else if (a.dtype() == DType::Int64)
      py << static_cast<int64_t>(v) << ",";
    else
      py << v << ",";
  }
  py << "], dtype=" << numpy_dtype(a.dtype()) << ").reshape((";
  for (int64_t d : a.shape()) py << d << ",";
  py << "))";
  return {a, py.str()};
}

template <class T>
Array from_fn(Shape shape, double (*f)(int64_t)) {
  std::vector<T> v(static_cast<size_t>(spmd::shape_size(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(f(static_cast<int64_t>(i)));
  return Array(v, shape);
}

TEST(ArrayPrint, MatchesNumpyArray2String) {
  const double nan = std::nan(""), inf = INFINITY;
  std::vector<Array> arrays = {
      Array({1.0, 2.0}),
      Array({0.1, 0.2, 0.3}),
      Array({1.0 / 3, 2.0}, DType::Float64),
      Array({1.0 / 3}, DType::Float32),
      Array({123.456789012, -0.5}, DType::Float64),  // cut to 8 digits after the point
      Array({1e-5, 1.0}),                            // scientific: tiny value
      Array({1e10, 1.0}),                            // scientific: huge value
      Array({-1.25e-7, 3.5e3, 1.0}, DType::Float64),
      Array({nan, 1.0, -inf}),
      Array({0.1, 1.0 / 3, -2.5}, DType::Float32).astype(DType::Float16),
      Array({1e-5, 1.0, 6e4}, DType::Float32).astype(DType::Float16),
      Array({nan, inf}),
      Array({-0.0, 0.0}),
      Array({0.0, 0.0}),
      Array({99999999.0, 1.0}, DType::Float64),
      Array(std::vector<uint32_t>{4000000000u, 7}, Shape{2}),
      Array(std::vector<int64_t>{-(int64_t{1} << 40), 3}, Shape{2}),
      Array(std::vector<bool>{true, true, false, true}, Shape{2, 2}),
      Array(std::vector<bool>{true, true}, Shape{2}),
      Array(true),
      Array(false),
      spmd::full({}, 42, DType::Int32),
      from_fn<float>({30}, [](int64_t i) { return i / 7.0; }),      // wraps at 75 columns
      from_fn<double>({3, 12}, [](int64_t i) { return i * 1.5; }),  // 2-D rows that wrap
      from_fn<int32_t>({2, 3, 4}, [](int64_t i) { return double(i); }),
      from_fn<int32_t>({100}, [](int64_t i) { return double(i * i); }),
      from_fn<float>({2000}, [](int64_t i) { return double(i); }),       // elided, scientific
      from_fn<int32_t>({1000, 2}, [](int64_t i) { return double(i); }),  // elided rows
      from_fn<float>({40, 40}, [](int64_t i) { return i * 0.5; }),       // elided both axes
      from_fn<int64_t>({2, 3, 200}, [](int64_t i) { return double(i - 600); }),
      from_fn<float>({1001}, [](int64_t i) { return i % 5 - 2.0; }),
      spmd::zeros({0}),
      spmd::zeros({2, 0}, DType::Int32),
  };
  // Rows whose last line ends near column 75 put the dtype after a run of spaces (JAX's rule).
  for (int n = 12; n <= 30; ++n) arrays.push_back(spmd::arange(0, n * 1000, 1000, DType::Int32));
  arrays.push_back(Array(std::vector<float>(16, 1.5f), Shape{16}));

  std::vector<PrintCase> cases;
  for (const Array& a : arrays) cases.push_back(case_of(a));
  PrintCase weak{Array(0.125), "np.array(0.125)"};
  cases.push_back(weak);

  std::string script =
      "import numpy as np\n"
      "def jax_repr(x, weak=False):\n"
      "    prefix = 'Array('\n"
      "    dtype_str = f'dtype={x.dtype.name}' + (', weak_type=True' if weak else '') + ')'\n"
      "    width = np.get_printoptions()['linewidth']\n"
      "    if x.size == 0:\n"
      "        s = f'[], shape={x.shape}'\n"
      "    else:\n"
      "        s = np.array2string(x, prefix=prefix, suffix=',', separator=', ',\n"
      "                            max_line_width=width)\n"
      "    last_line_len = len(s) - s.rfind('\\n') + 1\n"
      "    sep = ' ' * len(prefix) if last_line_len + len(dtype_str) + 1 > width else ' '\n"
      "    return f'{prefix}{s},{sep}{dtype_str}'\n";
  for (size_t i = 0; i < cases.size(); ++i)
    script += "print(jax_repr(" + cases[i].numpy + (cases[i].array.weak_type() ? ", True" : "") +
              "), end='\\0')\n";
  std::string out = spmd::test_util::run_numpy("array_test", "print", script);
  std::vector<std::string> expected;
  std::stringstream ss(out);
  for (std::string item; std::getline(ss, item, '\0');) expected.push_back(item);
  ASSERT_EQ(expected.size(), cases.size()) << out;
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(cases[i].array.str(), expected[i]) << "case " << i << ": " << cases[i].numpy;
}

}  // namespace
