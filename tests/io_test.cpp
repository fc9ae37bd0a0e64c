// Files: .npy checked against NumPy itself (Debian's /usr/bin/python3), and IDX (MNIST) files,
// plain and gzip-compressed, checked against the format's byte layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace {

using spmd::test_util::error_of;
using spmd::test_util::expect_contains;

using spmd::Array;
using spmd::DType;
using spmd::Shape;

std::string tmp(const std::string& name) { return spmd::test_util::scratch_path("io_test", name); }

// Runs a Python script (with numpy imported as np) and returns what it printed.
std::string python(const std::string& name, const std::string& body) {
  return spmd::test_util::run_numpy("io_test", name, body);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// ---- save_npy, read back by NumPy ------------------------------------------------------------

struct NumpyView {
  std::string dtype;  // numpy's dtype.name
  std::string shape;  // "2 3"
  bool c_order = false;
  std::vector<std::string> values;  // repr of each element, C order
};

NumpyView numpy_load(const std::string& path) {
  std::string out = python("load", "a = np.load('" + path +
                                       "')\n"
                                       "print(a.dtype.name)\n"
                                       "print(' '.join(str(d) for d in a.shape))\n"
                                       "print(a.flags.c_contiguous)\n"
                                       "print(' '.join(repr(x) for x in a.ravel().tolist()))\n");
  std::istringstream in(out);
  NumpyView v;
  std::string c_order, values;
  std::getline(in, v.dtype);
  std::getline(in, v.shape);
  std::getline(in, c_order);
  std::getline(in, values);
  v.c_order = c_order == "True";
  std::istringstream vs(values);
  for (std::string s; vs >> s;) v.values.push_back(s);
  return v;
}

TEST(SaveNpy, Float32ReadByNumpy) {
  std::vector<float> data = {0.1f, -2.5f, 3e-8f, 1e30f, -0.0f, 7.f};
  spmd::save_npy(tmp("f32.npy"), Array(data, Shape{2, 3}));
  NumpyView v = numpy_load(tmp("f32.npy"));
  EXPECT_EQ(v.dtype, "float32");
  EXPECT_EQ(v.shape, "2 3");
  EXPECT_TRUE(v.c_order);
  ASSERT_EQ(v.values.size(), data.size());
  // tolist() gives Python floats (doubles) holding the float32 values exactly.
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_EQ(std::strtod(v.values[i].c_str(), nullptr), data[i]);
}

TEST(SaveNpy, Float64ReadByNumpy) {
  std::vector<double> data = {0.1, 1.0 / 3, -1e-300, 6.02214076e23};
  spmd::save_npy(tmp("f64.npy"), Array(data, Shape{4}));
  NumpyView v = numpy_load(tmp("f64.npy"));
  EXPECT_EQ(v.dtype, "float64");
  EXPECT_EQ(v.shape, "4");
  ASSERT_EQ(v.values.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_EQ(std::strtod(v.values[i].c_str(), nullptr), data[i]);
}

TEST(SaveNpy, IntegersReadByNumpy) {
  spmd::save_npy(tmp("i32.npy"),
                 Array(std::vector<int32_t>{-2147483647 - 1, -1, 0, 2147483647}, Shape{2, 2}));
  NumpyView a = numpy_load(tmp("i32.npy"));
  EXPECT_EQ(a.dtype, "int32");
  EXPECT_EQ(a.shape, "2 2");
  EXPECT_EQ(a.values, (std::vector<std::string>{"-2147483648", "-1", "0", "2147483647"}));

  spmd::save_npy(tmp("i64.npy"), Array(std::vector<int64_t>{-(int64_t{1} << 62), 5}, Shape{2}));
  NumpyView b = numpy_load(tmp("i64.npy"));
  EXPECT_EQ(b.dtype, "int64");
  EXPECT_EQ(b.values, (std::vector<std::string>{std::to_string(-(int64_t{1} << 62)), "5"}));

  spmd::save_npy(tmp("u32.npy"), Array(std::vector<uint32_t>{4294967295u, 1}, Shape{1, 2}));
  NumpyView c = numpy_load(tmp("u32.npy"));
  EXPECT_EQ(c.dtype, "uint32");
  EXPECT_EQ(c.shape, "1 2");
  EXPECT_EQ(c.values, (std::vector<std::string>{"4294967295", "1"}));
}

TEST(SaveNpy, BoolReadByNumpy) {
  spmd::save_npy(tmp("bool.npy"), Array(std::vector<bool>{true, false, true}, Shape{3}));
  NumpyView v = numpy_load(tmp("bool.npy"));
  EXPECT_EQ(v.dtype, "bool");
  EXPECT_EQ(v.values, (std::vector<std::string>{"True", "False", "True"}));
}

TEST(SaveNpy, RankZeroReadByNumpy) {
  spmd::save_npy(tmp("scalar.npy"), Array(2.5f));
  NumpyView v = numpy_load(tmp("scalar.npy"));
  EXPECT_EQ(v.dtype, "float32");
  EXPECT_EQ(v.shape, "");
  EXPECT_EQ(v.values, (std::vector<std::string>{"2.5"}));
}

TEST(SaveNpy, EmptyReadByNumpy) {
  spmd::save_npy(tmp("empty.npy"), spmd::zeros({0, 3}, DType::Int64));
  NumpyView v = numpy_load(tmp("empty.npy"));
  EXPECT_EQ(v.dtype, "int64");
  EXPECT_EQ(v.shape, "0 3");
  EXPECT_TRUE(v.values.empty());
}

TEST(SaveNpy, ComputedArrayReadByNumpy) {
  // An op's result (not a literal): its strides and offset must not leak into the file.
  Array x = spmd::transpose(spmd::arange(0, 6, 1, DType::Float32).reshape({2, 3}));
  spmd::save_npy(tmp("computed.npy"), x);
  NumpyView v = numpy_load(tmp("computed.npy"));
  EXPECT_EQ(v.shape, "3 2");
  EXPECT_EQ(v.values, (std::vector<std::string>{"0.0", "3.0", "1.0", "4.0", "2.0", "5.0"}));
}

TEST(SaveNpy, HeaderIsAlignedTo64Bytes) {
  // Format 1.0: magic, version, little-endian header length; data starts at a multiple of 64.
  spmd::save_npy(tmp("align.npy"), spmd::zeros({5}));
  std::string b = read_bytes(tmp("align.npy"));
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(b[6], 1);
  EXPECT_EQ(b[7], 0);
  size_t header_len = static_cast<uint8_t>(b[8]) | static_cast<size_t>(static_cast<uint8_t>(b[9]))
                                                       << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(b.size(), 10 + header_len + 5 * sizeof(float));
  EXPECT_EQ(b[10 + header_len - 1], '\n');
}

TEST(SaveNpy, RoundTrip) {
  Array x(std::vector<double>{1.5, -2.25, 1e100, 0}, Shape{2, 1, 2});
  spmd::save_npy(tmp("roundtrip.npy"), x);
  Array y = spmd::load_npy(tmp("roundtrip.npy"));
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.dtype(), x.dtype());
  EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>());
}

TEST(SaveNpy, UnwritablePathIsAnError) {
  std::string msg = error_of([] { spmd::save_npy("/nonexistent-dir/x.npy", spmd::zeros({2})); });
  expect_contains(msg, "/nonexistent-dir/x.npy");
}

// ---- load_npy of files NumPy wrote -----------------------------------------------------------

// NumPy writes each file once per test run; values follow closed forms the C++ side recomputes.
class NumpyFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    python(
        "save",
        "d = '" + tmp("np_") +
            "'\n"
            "n = np.arange(24)\n"
            "np.save(d + 'f32.npy', (n * 0.5 - 3).astype(np.float32).reshape(2, 3, 4))\n"
            "np.save(d + 'f64.npy', (n / 7.0).reshape(4, 6))\n"
            "np.save(d + 'i32.npy', (n * 1000003 - 7).astype(np.int32))\n"
            "np.save(d + 'i64.npy', (n - 12).astype(np.int64) * (1 << 40))\n"
            "np.save(d + 'u32.npy', n.astype(np.uint32) * np.uint32(3000000019))\n"
            "np.save(d + 'bool.npy', (n % 3 == 0).reshape(6, 4))\n"
            "np.save(d + 'be_f4.npy', (n * 0.25).astype('>f4').reshape(4, 6))\n"
            "np.save(d + 'be_i8.npy', (n - 5).astype('>i8'))\n"
            "np.save(d + 'be_u4.npy', (n * 65537).astype('>u4'))\n"
            "np.save(d + 'fortran.npy', np.asfortranarray((n * 1.5).astype(np.float32).reshape(4, "
            "6)))\n"
            "np.save(d + 'fortran3.npy', np.asfortranarray(n.astype(np.int32).reshape(2, 3, 4)))\n"
            "np.save(d + 'scalar.npy', np.float64(-4.5))\n"
            "np.save(d + 'empty.npy', np.zeros((3, 0), np.float32))\n"
            "with open(d + 'v2.npy', 'wb') as f:\n"
            "    np.lib.format.write_array(f, n.astype(np.int32).reshape(3, 8), version=(2, 0))\n"
            "np.save(d + 'c8.npy', np.array([1 + 2j, -0.5j, 3], np.complex64))\n"
            "np.save(d + 'i1.npy', np.zeros(3, np.int8))\n"
            "np.save(d + 'f2.npy', np.zeros(3, np.float16))\n"
            "np.save(d + 'u1.npy', np.zeros(3, np.uint8))\n");
  }
  static std::string file(const std::string& name) { return tmp("np_" + name); }
};

TEST_F(NumpyFiles, Float32) {
  Array a = spmd::load_npy(file("f32.npy"));
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  auto v = a.to_vector<float>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], static_cast<float>(i * 0.5 - 3)) << i;
}

TEST_F(NumpyFiles, Float64) {
  Array a = spmd::load_npy(file("f64.npy"));
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.shape(), (Shape{4, 6}));
  auto v = a.to_vector<double>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i / 7.0) << i;
}

TEST_F(NumpyFiles, Int32AndInt64) {
  auto a = spmd::load_npy(file("i32.npy"));
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.shape(), (Shape{24}));
  auto v = a.to_vector<int32_t>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i * 1000003 - 7) << i;
  auto b = spmd::load_npy(file("i64.npy"));
  EXPECT_EQ(b.dtype(), DType::Int64);
  auto w = b.to_vector<int64_t>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(w[i], (int64_t{i} - 12) * (int64_t{1} << 40)) << i;
}

TEST_F(NumpyFiles, UInt32) {
  auto a = spmd::load_npy(file("u32.npy"));
  EXPECT_EQ(a.dtype(), DType::UInt32);
  auto v = a.to_vector<uint32_t>();
  for (uint32_t i = 0; i < 24; ++i) EXPECT_EQ(v[i], i * 3000000019u) << i;  // wraps as numpy's
}

TEST_F(NumpyFiles, Bool) {
  auto a = spmd::load_npy(file("bool.npy"));
  EXPECT_EQ(a.dtype(), DType::Bool);
  EXPECT_EQ(a.shape(), (Shape{6, 4}));
  auto v = a.to_vector<bool>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i % 3 == 0) << i;
}

TEST_F(NumpyFiles, BigEndian) {
  auto f = spmd::load_npy(file("be_f4.npy"));
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.shape(), (Shape{4, 6}));
  auto fv = f.to_vector<float>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(fv[i], i * 0.25f) << i;
  auto l = spmd::load_npy(file("be_i8.npy"));
  EXPECT_EQ(l.dtype(), DType::Int64);
  auto lv = l.to_vector<int64_t>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(lv[i], i - 5) << i;
  auto u = spmd::load_npy(file("be_u4.npy"));
  EXPECT_EQ(u.dtype(), DType::UInt32);
  auto uv = u.to_vector<uint32_t>();
  for (uint32_t i = 0; i < 24; ++i) EXPECT_EQ(uv[i], i * 65537u) << i;
}

TEST_F(NumpyFiles, FortranOrderGivesRowMajorValues) {
  auto a = spmd::load_npy(file("fortran.npy"));
  EXPECT_EQ(a.shape(), (Shape{4, 6}));
  auto v = a.to_vector<float>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i * 1.5f) << i;
  auto b = spmd::load_npy(file("fortran3.npy"));
  EXPECT_EQ(b.shape(), (Shape{2, 3, 4}));
  auto w = b.to_vector<int32_t>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(w[i], i) << i;
}

TEST_F(NumpyFiles, RankZeroAndEmpty) {
  auto s = spmd::load_npy(file("scalar.npy"));
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_EQ(s.item<double>(), -4.5);
  auto e = spmd::load_npy(file("empty.npy"));
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(e.dtype(), DType::Float32);
}

TEST_F(NumpyFiles, FormatVersion2) {
  auto a = spmd::load_npy(file("v2.npy"));
  EXPECT_EQ(a.shape(), (Shape{3, 8}));
  auto v = a.to_vector<int32_t>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i) << i;
}

TEST_F(NumpyFiles, UnsupportedDtypesNameTheDescriptor) {
  for (const char* name : {"i1", "u1"}) {
    std::string msg = error_of([&] { spmd::load_npy(file(std::string(name) + ".npy")); });
    expect_contains(msg, name);
    expect_contains(msg, "unsupported dtype");
    expect_contains(msg, "expected one of");
  }
}

TEST_F(NumpyFiles, ComplexArraysLoad) {
  spmd::Array c = spmd::load_npy(file("c8.npy"));
  EXPECT_EQ(c.dtype(), spmd::complex64);
  EXPECT_EQ(c.to_vector<std::complex<float>>(),
            (std::vector<std::complex<float>>{{1, 2}, {0, -0.5f}, {3, 0}}));
}

TEST_F(NumpyFiles, TruncatedDataNamesExpectedAndGivenBytes) {
  std::string b = read_bytes(file("f64.npy"));
  write_bytes(tmp("trunc.npy"), b.substr(0, b.size() - 9));
  std::string msg = error_of([] { spmd::load_npy(tmp("trunc.npy")); });
  expect_contains(msg, "truncated");
  expect_contains(msg, "expected 192 bytes");  // 24 float64 values
  expect_contains(msg, "got 183");
}

TEST_F(NumpyFiles, TruncatedHeader) {
  write_bytes(tmp("trunc_header.npy"), read_bytes(file("f64.npy")).substr(0, 40));
  std::string msg = error_of([] { spmd::load_npy(tmp("trunc_header.npy")); });
  expect_contains(msg, "truncated header");
}

// ---- load_npy of broken files ----------------------------------------------------------------

std::string npy_with_header(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

// Python 2 wrote long integers as 6L. NumPy reads them in version 1.0 and 2.0 headers only: a
// version 3.0 header is Python 3 text, where 6L is a syntax error. NumPy itself is asked.
TEST(LoadNpy, PythonTwoLongsOnlyBeforeVersionThree) {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2L,), }";
  const std::string data("\x07\0\0\0\xf9\xff\xff\xff", 8);  // 7, -7
  std::string v1 = npy_with_header(dict, data);
  // Version 3.0: the same header with a 4-byte length.
  std::string v3 = v1.substr(0, 6) + std::string("\x03\x00", 2) + v1.substr(8, 2) +
                   std::string(2, '\0') + v1.substr(10);
  write_bytes(tmp("long_v1.npy"), v1);
  write_bytes(tmp("long_v3.npy"), v3);
  EXPECT_EQ(spmd::load_npy(tmp("long_v1.npy")).to_vector<int32_t>(), (std::vector<int32_t>{7, -7}));
  std::string msg = error_of([] { spmd::load_npy(tmp("long_v3.npy")); });
  expect_contains(msg, "corrupt header");
  expect_contains(msg, "'shape'");
  std::string numpy = python("long_v3",
                             "for v in ('1', '3'):\n"
                             "    try:\n"
                             "        print(v, np.load('" +
                                 tmp("long_v") +
                                 "' + v + '.npy').tolist())\n"
                                 "    except ValueError:\n"
                                 "        print(v, 'refused')\n");
  EXPECT_EQ(numpy, "1 [7, -7]\n3 refused\n");
}

TEST(LoadNpy, MissingFileNamesThePath) {
  std::string msg = error_of([] { spmd::load_npy(tmp("does_not_exist.npy")); });
  expect_contains(msg, "cannot open");
  expect_contains(msg, "does_not_exist.npy");
}

TEST(LoadNpy, BadMagic) {
  write_bytes(tmp("bad_magic.npy"), "PK\x03\x04 this is a zip file, not npy");
  std::string msg = error_of([] { spmd::load_npy(tmp("bad_magic.npy")); });
  expect_contains(msg, "not a .npy file");
}

TEST(LoadNpy, EmptyFile) {
  write_bytes(tmp("zero_bytes.npy"), "");
  EXPECT_THROW(spmd::load_npy(tmp("zero_bytes.npy")), spmd::Error);
}

TEST(LoadNpy, UnknownVersion) {
  std::string b =
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "abcd");
  b[6] = 9;
  write_bytes(tmp("v9.npy"), b);
  std::string msg = error_of([] { spmd::load_npy(tmp("v9.npy")); });
  expect_contains(msg, "version 9");
}

TEST(LoadNpy, HeaderWithoutDescr) {
  write_bytes(tmp("no_descr.npy"),
              npy_with_header("{'fortran_order': False, 'shape': (1,), }", "abcd"));
  std::string msg = error_of([] { spmd::load_npy(tmp("no_descr.npy")); });
  expect_contains(msg, "descr");
}

TEST(LoadNpy, CorruptShape) {
  write_bytes(
      tmp("bad_shape.npy"),
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "abcdefgh"));
  std::string msg = error_of([] { spmd::load_npy(tmp("bad_shape.npy")); });
  expect_contains(msg, "shape");
}

TEST(LoadNpy, HugeShapeIsAnErrorNotACrash) {
  // 2^40 * 2^40 elements overflow any byte count.
  write_bytes(tmp("huge.npy"), npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                               "(1099511627776, 1099511627776), }",
                                               "abcdefgh"));
  expect_contains(error_of([] { spmd::load_npy(tmp("huge.npy")); }), "too large");
}

// ---- IDX -------------------------------------------------------------------------------------

uint32_t be32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 8 |
         static_cast<uint8_t>(b[at + 3]);
}

std::string be32_bytes(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// An IDX header: two zero bytes, the type code, the rank, then each dimension big-endian.
std::string idx_header(uint8_t type, const Shape& shape) {
  std::string h = {0, 0, static_cast<char>(type), static_cast<char>(shape.size())};
  for (int64_t d : shape) h += be32_bytes(static_cast<uint32_t>(d));
  return h;
}

TEST(Idx, BytesFileLayoutAndRoundTrip) {
  std::vector<int32_t> data(2 * 3 * 4);
  for (int i = 0; i < 24; ++i) data[i] = (i * 37) % 256;
  spmd::save_idx(tmp("bytes.idx"), Array(data, Shape{2, 3, 4}), true);
  std::string b = read_bytes(tmp("bytes.idx"));
  ASSERT_EQ(b.size(), 4 + 3 * 4 + 24u);
  EXPECT_EQ(b.substr(0, 16), idx_header(0x08, {2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(static_cast<uint8_t>(b[16 + i]), data[i]) << i;
  Array a = spmd::load_idx(tmp("bytes.idx"));
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(a.to_vector<int32_t>(), data);
}

TEST(Idx, Int32FileIsBigEndian) {
  std::vector<int32_t> data = {-1, 0x01020304, -2147483647 - 1, 7};
  spmd::save_idx(tmp("i32.idx"), Array(data, Shape{4}));
  std::string b = read_bytes(tmp("i32.idx"));
  ASSERT_EQ(b.size(), 8 + 16u);
  EXPECT_EQ(b.substr(0, 8), idx_header(0x0C, {4}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<int32_t>(be32(b, 8 + 4 * i)), data[i]) << i;
  Array a = spmd::load_idx(tmp("i32.idx"));
  EXPECT_EQ(a.dtype(), DType::Int32);
  EXPECT_EQ(a.to_vector<int32_t>(), data);
}

TEST(Idx, Float32RoundTrip) {
  std::vector<float> data = {0.1f, -2.5f, 1e-40f, 3.4e38f, 0.f, -7.f};
  spmd::save_idx(tmp("f32.idx"), Array(data, Shape{3, 2}));
  std::string b = read_bytes(tmp("f32.idx"));
  EXPECT_EQ(b.substr(0, 12), idx_header(0x0D, {3, 2}));
  uint32_t first = be32(b, 12), expected;
  std::memcpy(&expected, &data[0], 4);
  EXPECT_EQ(first, expected);
  Array a = spmd::load_idx(tmp("f32.idx"));
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(a.shape(), (Shape{3, 2}));
  EXPECT_EQ(a.to_vector<float>(), data);
}

TEST(Idx, Float64RoundTrip) {
  std::vector<double> data = {1.0 / 3, -1e300, 5e-324};
  spmd::save_idx(tmp("f64.idx"), Array(data, Shape{3}));
  std::string b = read_bytes(tmp("f64.idx"));
  EXPECT_EQ(b.substr(0, 8), idx_header(0x0E, {3}));
  EXPECT_EQ(b.size(), 8 + 24u);
  Array a = spmd::load_idx(tmp("f64.idx"));
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(a.to_vector<double>(), data);
}

TEST(Idx, SignedByteAndShortLoadAsInt32) {
  std::string sb = idx_header(0x09, {4}) + std::string("\x80\xff\x00\x7f", 4);
  write_bytes(tmp("i8.idx"), sb);
  EXPECT_EQ(spmd::load_idx(tmp("i8.idx")).to_vector<int32_t>(),
            (std::vector<int32_t>{-128, -1, 0, 127}));
  std::string sh = idx_header(0x0B, {3}) + std::string("\x80\x00\xff\xfe\x01\x02", 6);
  write_bytes(tmp("i16.idx"), sh);
  EXPECT_EQ(spmd::load_idx(tmp("i16.idx")).to_vector<int32_t>(),
            (std::vector<int32_t>{-32768, -2, 258}));
}

TEST(Idx, GzipCompressedFile) {
  // An MNIST-like image file: 5 images of 4x3 bytes, compressed by Python's gzip module.
  std::vector<int32_t> data(5 * 4 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>((i * 53 + 11) % 256);
  spmd::save_idx(tmp("images.idx"), Array(data, Shape{5, 4, 3}), true);
  python("gzip",
         "import gzip\n"
         "open('" +
             tmp("images.idx.gz") + "', 'wb').write(gzip.compress(open('" + tmp("images.idx") +
             "', 'rb').read()))\n");
  std::string gz = read_bytes(tmp("images.idx.gz"));
  ASSERT_GE(gz.size(), 2u);
  ASSERT_EQ(gz.substr(0, 2), "\x1f\x8b");  // really compressed
  Array a = spmd::load_idx(tmp("images.idx.gz"));
  EXPECT_EQ(a.shape(), (Shape{5, 4, 3}));
  EXPECT_EQ(a.to_vector<int32_t>(), data);
}

TEST(Idx, CorruptGzipIsAnError) {
  std::vector<int32_t> data(4000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>((i * i) % 251);
  spmd::save_idx(tmp("big.idx"), Array(data, Shape{40, 100}), true);
  python("gzip_big",
         "import gzip\n"
         "open('" +
             tmp("big.idx.gz") + "', 'wb').write(gzip.compress(open('" + tmp("big.idx") +
             "', 'rb').read()))\n");
  std::string gz = read_bytes(tmp("big.idx.gz"));
  ASSERT_GT(gz.size(), 100u);
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) gz[i] = static_cast<char>(~gz[i]);
  write_bytes(tmp("corrupt.idx.gz"), gz);
  std::string msg = error_of([] { spmd::load_idx(tmp("corrupt.idx.gz")); });
  expect_contains(msg, "corrupt.idx.gz");
}

TEST(Idx, TruncatedGzipIsAnError) {
  std::vector<int32_t> data(4000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>((i * 7) % 256);
  spmd::save_idx(tmp("big2.idx"), Array(data, Shape{4000}), true);
  python("gzip_big2",
         "import gzip\n"
         "open('" +
             tmp("big2.idx.gz") + "', 'wb').write(gzip.compress(open('" + tmp("big2.idx") +
             "', 'rb').read()))\n");
  std::string gz = read_bytes(tmp("big2.idx.gz"));
  write_bytes(tmp("cut.idx.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_THROW(spmd::load_idx(tmp("cut.idx.gz")), spmd::Error);
}

TEST(Idx, TruncatedDataNamesExpectedAndGivenBytes) {
  write_bytes(tmp("short.idx"), idx_header(0x08, {10, 10}) + std::string(50, '\x01'));
  std::string msg = error_of([] { spmd::load_idx(tmp("short.idx")); });
  expect_contains(msg, "truncated");
  expect_contains(msg, "expected 100 bytes");
  expect_contains(msg, "got 50");
}

TEST(Idx, TruncatedHeader) {
  write_bytes(tmp("short_header.idx"), idx_header(0x08, {10, 10}).substr(0, 9));
  std::string msg = error_of([] { spmd::load_idx(tmp("short_header.idx")); });
  expect_contains(msg, "truncated header");
}

TEST(Idx, BadMagicAndUnknownType) {
  write_bytes(tmp("magic.idx"), std::string("\x01\x02\x08\x01", 4) + be32_bytes(1) + "x");
  expect_contains(error_of([] { spmd::load_idx(tmp("magic.idx")); }), "not an IDX file");
  write_bytes(tmp("type.idx"), idx_header(0x0A, {1}) + "x");
  std::string msg = error_of([] { spmd::load_idx(tmp("type.idx")); });
  expect_contains(msg, "element type");
  expect_contains(msg, "0xa");
}

TEST(Idx, HugeDimensionsAreAnErrorNotACrash) {
  write_bytes(tmp("huge.idx"), idx_header(0x08, {0xffffffff, 0xffffffff, 0xffffffff}) + "abcd");
  expect_contains(error_of([] { spmd::load_idx(tmp("huge.idx")); }), "too large");
}

TEST(Idx, MissingFile) {
  std::string msg = error_of([] { spmd::load_idx(tmp("no_such.idx")); });
  expect_contains(msg, "no_such.idx");
}

TEST(Idx, SaveBytesOutOfRangeAndBadDtype) {
  std::string msg = error_of([] { spmd::save_idx(tmp("x.idx"), Array({1, 256}), true); });
  expect_contains(msg, "[0, 255]");
  expect_contains(msg, "256");
  msg = error_of([] { spmd::save_idx(tmp("x.idx"), Array(std::vector<int64_t>{1}, Shape{1})); });
  expect_contains(msg, "int64");
}

}  // namespace
