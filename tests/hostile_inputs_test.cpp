// Hostile inputs (issue 10, points 3, 4, 15 and 16): shapes whose element count overflows,
// bool arrays made from bytes other than 0 and 1, malformed .npy headers, checkpoints and IDX
// files that claim more data than they hold (or far less than they inflate to). Each must end in
// a clear spmd::Error, without allocating what the input merely claims; memory is checked with
// the process's peak RSS, not with timings.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/parsers.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

std::string tmp(const std::string& name) {
  return test_util::scratch_path("hostile_inputs_test", name);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Peak resident memory of this process so far, in MiB.
long peak_rss_mib() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// ---- 3. shapes whose element count overflows --------------------------------------------------
const int64_t k62 = int64_t{1} << 62;

TEST(ShapeOverflow, ReshapeWhoseCountWrapsToTheSameSizeIsRefused) {
  // (2^62 + 1) * 4 wraps to 4 in 64 bits: the old check saw 4 == 4 and accepted it.
  std::string msg = error_of([] { ones({4}).reshape({k62 + 1, 4}); });
  expect_contains(msg, "reshape");
  expect_contains(msg, "overflows");
  // Wrapping to 0 (2^32 * 2^32), to a negative count, and with a -1 to infer.
  EXPECT_THROW(zeros({0}).reshape({int64_t{1} << 32, int64_t{1} << 32}), Error);
  EXPECT_THROW(ones({2}).reshape({k62, 2, 2}), Error);
  EXPECT_THROW(ones({4}).reshape({-1, k62 + 1, 4}), Error);
  EXPECT_THROW(ones({4}).reshape({-1, k62, 4}), Error);
  // NumPy's rule: even an empty array's non-zero dimensions must have a product that fits.
  expect_contains(error_of([] { zeros({0}).reshape({k62, 4, 0}); }), "overflows");
  // The ordinary cases still work.
  EXPECT_EQ(ones({4}).reshape({-1, 2}).shape(), (Shape{2, 2}));
  EXPECT_EQ(zeros({0}).reshape({int64_t{1} << 40, 0}).shape(), (Shape{int64_t{1} << 40, 0}));
}

TEST(ShapeOverflow, NegativeDimensionsAreRefusedEverywhere) {
  expect_contains(error_of([] { ones({4}).reshape({-2, -2}); }), "non-negative");
  expect_contains(error_of([] { zeros({-1}); }), "non-negative");
  float data[4] = {};
  expect_contains(error_of([&] { Array(data, Shape{-1, -4}, DType::Float32); }), "non-negative");
  EXPECT_THROW(iota(DType::Int32, {-3}), Error);
  EXPECT_THROW(eye(-1), Error);
  EXPECT_THROW(linspace(0, 1, -2), Error);
  // Traced: a shape is checked when the equation is recorded, not when it runs.
  EXPECT_THROW(make_jaxpr([](const Array& x) { return broadcast_to(x, {-1}); })(ones({1})), Error);
}

TEST(ShapeOverflow, TracedShapesAreCheckedWhenRecorded) {
  // Under tracing no buffer is made, so before the fix nothing checked these shapes; the
  // compiled program then sized its buffers from a wrapped byte count.
  auto broadcast = [](const Array& x) {
    return broadcast_to(x, {int64_t{1} << 32, int64_t{1} << 32});
  };
  std::string msg = error_of([&] { make_jaxpr(broadcast)(ones({1, 1})); });
  expect_contains(msg, "broadcast_in_dim");
  expect_contains(msg, "too large");
  EXPECT_THROW(jit(broadcast)(ones({1, 1})), Error);
  // (2^31, 1) @ (1, 2^31) float32: 2^62 elements, 2^64 bytes.
  auto outer = [](const Array& a, const Array& b) {
    return dot(broadcast_to(a, {int64_t{1} << 31, 1}), broadcast_to(b, {1, int64_t{1} << 31}));
  };
  EXPECT_THROW(make_jaxpr(outer)(ones({1, 1}), ones({1, 1})), Error);
  // 2^62 bools fit in a byte count; two of them concatenated do not fit in an int64 axis.
  auto concat = [](const Array& x) {
    Array big = broadcast_to(x, {k62});
    return concatenate({big, big});
  };
  msg = error_of([&] { make_jaxpr(concat)(Array(std::vector<bool>{true}, Shape{1})); });
  expect_contains(msg, "concatenate");
  expect_contains(msg, "overflows");
  auto padded = [](const Array& x) {
    return lax::pad(broadcast_to(x, {k62}), Array(false), {k62}, {0}, {0});
  };
  msg = error_of([&] { make_jaxpr(padded)(Array(std::vector<bool>{true}, Shape{1})); });
  expect_contains(msg, "pad");
  expect_contains(msg, "overflows");
  auto interior = [](const Array& x) {
    return lax::pad(broadcast_to(x, {k62}), Array(false), {0}, {0}, {4});
  };
  EXPECT_THROW(make_jaxpr(interior)(Array(std::vector<bool>{true}, Shape{1})), Error);
  // A huge slice stride is not an overflow: ceil(3 / stride) is 1.
  Array s = slice(arange(3), {0}, {3}, {INT64_MAX});
  EXPECT_EQ(s.to_vector<int32_t>(), std::vector<int32_t>{0});
}

TEST(ShapeOverflow, CreationFunctionsRefuseHugeSizesWithAnError) {
  // Each used to wrap (eye: n * n), convert an out-of-range double (arange) or throw
  // std::length_error / std::bad_alloc instead of spmd::Error.
  expect_contains(error_of([] { eye(int64_t{1} << 32); }), "too large");
  expect_contains(error_of([] { arange(0, 1e300); }), "too large");
  EXPECT_THROW(arange(0, 1, 1e-300), Error);
  EXPECT_THROW(linspace(0, 1, k62), Error);
  EXPECT_THROW(ones({k62 + 1, 4}), Error);
  EXPECT_THROW(full({int64_t{1} << 32, int64_t{1} << 32}, 1.0), Error);
  EXPECT_THROW(iota(DType::Int32, {int64_t{1} << 32, int64_t{1} << 32}), Error);
  std::vector<float> four(4);
  // The vector constructor compared 4 values against the wrapped count 4.
  EXPECT_THROW(Array(four, Shape{k62 + 1, 4}), Error);
  EXPECT_THROW(Array(four.data(), Shape{k62 + 1, 4}, DType::Float32), Error);
  EXPECT_EQ(arange(0, 5, 2).to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(eye(2).to_vector<float>(), (std::vector<float>{1, 0, 0, 1}));
}

// ---- 4. bool arrays from raw bytes ------------------------------------------------------------
// Checks that a bool array built from the bytes {0, 2, 255, 1, 0, 128} behaves as
// [False, True, True, True, False, True] in every operation, as NumPy's bool does.
void expect_normalised_bools(const Array& a) {
  std::vector<bool> want = {false, true, true, true, false, true};
  ASSERT_EQ(a.dtype(), DType::Bool);
  ASSERT_EQ(a.size(), 6);
  const uint8_t* stored = a.data<uint8_t>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(stored[i], want[i] ? 1 : 0) << i;
  EXPECT_EQ(sum(a).item<int32_t>(), 4);  // the count of non-zero bytes, not 2 + 255 + 1 + 128
  EXPECT_EQ(sum(astype(a, DType::Int32)).item<int32_t>(), 4);
  EXPECT_EQ(jit([](const Array& x) { return sum(x); })(a).item<int32_t>(), 4);
  std::vector<bool> negated = {true, false, false, false, true, false};
  EXPECT_EQ(logical_not(a).to_vector<bool>(), negated);
  EXPECT_EQ(equal(a, Array(true)).to_vector<bool>(), want);
  EXPECT_EQ(equal(a, ones({6}, DType::Bool)).to_vector<bool>(), want);
  EXPECT_TRUE(all(equal(a, Array(want, Shape{6}))).item<bool>());
  EXPECT_EQ(astype(a, DType::Float32).to_vector<float>(), (std::vector<float>{0, 1, 1, 1, 0, 1}));
  EXPECT_EQ(a.str(), "Array([False,  True,  True,  True, False,  True], dtype=bool)");
}

const char kBoolBytes[6] = {0, 2, static_cast<char>(255), 1, 0, static_cast<char>(128)};

TEST(BoolBytes, RawConstructorNormalisesToZeroAndOne) {
  expect_normalised_bools(Array(kBoolBytes, Shape{6}, DType::Bool));
}

TEST(BoolBytes, NpyWithBytesOtherThanZeroAndOne) {
  std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (6,), }";
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size());
  file += '\0';
  write_bytes(tmp("bools.npy"), file + header + std::string(kBoolBytes, 6));
  expect_normalised_bools(load_npy(tmp("bools.npy")));
}

// CRC-32 (IEEE, as zlib's crc32), bit by bit: a checkpoint's checksum for crafted files.
uint32_t crc32_of(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
  }
  return ~c;
}

// A checkpoint file of the given body (magic, version, entries) with its checksum appended.
std::string with_crc(const std::string& body) {
  uint32_t crc = crc32_of(body);
  return body + std::string(reinterpret_cast<const char*>(&crc), 4);
}

std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string named(const std::string& s) { return u64(s.size()) + s; }
const std::string kCkptHead = std::string("SPMDCKPT\x01\x00\x00\x00", 12);

TEST(BoolBytes, CheckpointEntryWithBytesOtherThanZeroAndOne) {
  // One bool array entry "mask" (dtype code 0) of shape (6,).
  std::string body = kCkptHead + u64(0) + u64(1) + named("mask") + u64(0) + u64(1) + u64(6) +
                     u64(6) + std::string(kBoolBytes, 6);
  write_bytes(tmp("bools.ckpt"), with_crc(body));
  nn::Checkpoint c = nn::load_checkpoint(tmp("bools.ckpt"));
  expect_normalised_bools(c.arrays.at("mask"));
}

TEST(BoolBytes, VectorOfBoolAndScalarsStayZeroOrOne) {
  Array v(std::vector<bool>{true, false, true}, Shape{3});
  EXPECT_EQ(sum(v).item<int32_t>(), 2);
  EXPECT_EQ(sum(logical_not(Array(true))).item<int32_t>(), 0);
}

// ---- 15. .npy headers --------------------------------------------------------------------------
// A version-1.0 .npy file with this header dict and data.
std::string npy(const std::string& dict, const std::string& data, int version = 1) {
  std::string header = dict;
  size_t pre = version == 1 ? 10 : 12;
  header += std::string((64 - (pre + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  size_t n = header.size();
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) out += static_cast<char>(n >> (8 * i));
  return out + header + data;
}

std::string npy_error(const std::string& file) {
  write_bytes(tmp("case.npy"), file);
  try {
    load_npy(tmp("case.npy"));
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an spmd::Error: ") + e.what() + ">";
  }
  return "<no error>";
}

const std::string kF4 = std::string(8, '\0');  // two float32 zeros

TEST(NpyHeader, MalformedValuesAreRefusedNamingTheKey) {
  struct Case {
    const char* dict;
    const char* key;  // what the message must name
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape':}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': }", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 2}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (True, 2)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x2,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "shape"},
      {"{'descr': '<f4', 'fortran_order': None, 'shape': (2,)}", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': 'False', 'shape': (2,)}", "fortran_order"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", "fortran_order"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (2,)}", "descr"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", "descr"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", "shape"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "descr"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "extra"},
      {"{'descr': '<f4', 'shape': (2,)}", "fortran_order"},
      {"{'fortran_order': False, 'shape': (2,)}", "descr"},
      {"{'descr': '<f4', 'fortran_order': False}", "shape"},
  };
  for (const Case& c : cases) {
    std::string msg = npy_error(npy(c.dict, kF4));
    SCOPED_TRACE(c.dict);
    expect_contains(msg, "load_npy(");
    expect_contains(msg, "case.npy");
    expect_contains(msg, std::string("'") + c.key + "'");
  }
}

TEST(NpyHeader, MalformedDictsAreRefused) {
  const char* cases[] = {
      "",
      "   ",
      "['descr', '<f4']",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",  // no closing brace
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",  // unterminated string
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",  // missing comma
      "{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}",  // missing colon
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}}",
      "{descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{1: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': {'y': }}",
      "{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,)}",
  };
  for (const char* dict : cases) {
    SCOPED_TRACE(dict);
    std::string msg = npy_error(npy(dict, kF4));
    expect_contains(msg, "corrupt header");
  }
  // Deep nesting is refused without recursing 10000 frames deep.
  std::string deep =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(10000, '(') +
      std::string(10000, ')') + "}";
  expect_contains(npy_error(npy(deep, kF4)), "nested");
  // Non-printable header bytes are quoted as escapes, not copied into the message.
  std::string msg = npy_error(npy(std::string("{'descr': '<f4'\x01}"), kF4));
  expect_contains(msg, "\\x01");
}

TEST(NpyHeader, UnsupportedDescriptorsAreRefused) {
  for (const char* d : {"<c32", "|u1", "<U3", "|O", "<i4x", "", "<", "f4<"}) {
    SCOPED_TRACE(d);
    std::string msg = npy_error(
        npy(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (2,)}", kF4));
    expect_contains(msg, "unsupported dtype");
  }
}

TEST(NpyHeader, WhatNumpyAcceptsIsAccepted) {
  // Layouts ast.literal_eval reads and NumPy accepts: other quotes, no trailing comma, any key
  // order, spaces and newlines, Python 2's long integers, parenthesised scalars.
  std::string two = std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f
  for (const char* dict : {
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
           "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
           "  {  'descr' :'<f4' ,\n'fortran_order':False,'shape':( 2 , ) }  ",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,)}",
           "{'descr': 'f4', 'fortran_order': False, 'shape': (2,)}",
           "{'descr': '=f4', 'fortran_order': False, 'shape': (+2,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}",
       }) {
    SCOPED_TRACE(dict);
    write_bytes(tmp("ok.npy"), npy(dict, two));
    Array a = load_npy(tmp("ok.npy"));
    EXPECT_EQ(a.shape(), Shape{2});
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2}));
  }
  write_bytes(tmp("ok.npy"), npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2)}", two));
  EXPECT_EQ(load_npy(tmp("ok.npy")).shape(), (Shape{1, 2}));
  write_bytes(tmp("ok.npy"),
              npy("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", two.substr(0, 4)));
  EXPECT_EQ(load_npy(tmp("ok.npy")).item<float>(), 1.0f);
  for (int version : {2, 3}) {
    write_bytes(tmp("ok.npy"),
                npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", two, version));
    EXPECT_EQ(load_npy(tmp("ok.npy")).to_vector<float>(), (std::vector<float>{1, 2}));
  }
  write_bytes(tmp("ok.npy"),
              npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776)}", ""));
  EXPECT_EQ(load_npy(tmp("ok.npy")).shape(), (Shape{0, 1099511627776}));
}

TEST(NpyHeader, PreambleAndSizesAreChecked) {
  std::string good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", kF4);
  std::string minor = good;
  minor[7] = 1;
  expect_contains(npy_error(minor), "version 1.1");
  std::string v4 = good;
  v4[6] = 4;
  expect_contains(npy_error(v4), "version 4.0");
  std::string magic = good;
  magic[1] = 'n';
  expect_contains(npy_error(magic), "not a .npy file");
  expect_contains(npy_error(good.substr(0, 9)), "truncated header");
  // Header length beyond the file.
  std::string long_header = good;
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  expect_contains(npy_error(long_header), "truncated header");
  std::string v2 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", kF4, 2);
  v2[11] = '\x7f';  // a 2 GB header length in a 4-byte field
  expect_contains(npy_error(v2), "truncated header");
  std::string msg = npy_error(good.substr(0, good.size() - 1));
  expect_contains(msg, "truncated data");
  expect_contains(msg, "expected 8 bytes");
  expect_contains(msg, "got 7");
  msg = npy_error(good + "x");
  expect_contains(msg, "trailing data");
  expect_contains(msg, "got 9");
}

TEST(NpyHeader, HugeShapeIsRefusedBeforeAllocating) {
  long before = peak_rss_mib();
  // 2^40 float64 values claimed, 8 bytes present: refused from the sizes alone.
  std::string msg =
      npy_error(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,)}", kF4));
  expect_contains(msg, "truncated data");
  expect_contains(msg, "8796093022208");
  EXPECT_LT(peak_rss_mib() - before, 64);
  expect_contains(
      npy_error(
          npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", kF4)),
      "too large");
}

TEST(NpyHeader, InMemoryParserMatchesTheFileLoader) {
  std::string good = npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}",
                         std::string("\x07\x00\x00\x00\xf9\xff\xff\xff", 8));
  EXPECT_EQ(io::parse_npy(good, "mem").to_vector<int32_t>(), (std::vector<int32_t>{7, -7}));
  expect_contains(error_of([&] { io::parse_npy(good.substr(0, 20), "buffer-name"); }),
                  "buffer-name");
}

// ---- 16. checkpoints ---------------------------------------------------------------------------
std::string ckpt_error(const std::string& name, const std::string& file) {
  write_bytes(tmp(name), file);
  try {
    nn::load_checkpoint(tmp(name));
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an spmd::Error: ") + e.what() + ">";
  }
  return "<no error>";
}

TEST(CheckpointSizes, ShortFileClaimingAHugeEntryIsRefusedBeforeAllocating) {
  // The file: 114 bytes claiming a (30000, 30000) float32 entry (3.6 GB).
  std::string body = kCkptHead + u64(1) + named("epoch") + u64(3) + u64(1) + named("weights") +
                     u64(6) + u64(2) + u64(30000) + u64(30000) + u64(3600000000ull) + "abcdef";
  std::string file = with_crc(body);
  ASSERT_EQ(file.size(), 114u);
  long before = peak_rss_mib();
  std::string msg = ckpt_error("huge.ckpt", file);
  EXPECT_LT(peak_rss_mib() - before, 64) << "the loader allocated what the entry claims";
  expect_contains(msg, tmp("huge.ckpt"));
  expect_contains(msg, "'weights'");
  expect_contains(msg, "(30000, 30000)");
  expect_contains(msg, "3600000000");
  expect_contains(msg, "6 left");
}

TEST(CheckpointSizes, EveryCountAndLengthIsCheckedAgainstTheFile) {
  struct Case {
    std::string name, body, expect;
  };
  std::string arr = named("w") + u64(6) + u64(1) + u64(2) + u64(8) + std::string(8, '\0');
  const Case cases[] = {
      {"int_count", kCkptHead + u64(uint64_t{1} << 60), "integer count"},
      {"name_length", kCkptHead + u64(1) + u64(uint64_t{1} << 40) + std::string(16, 'x'),
       "integer entry 0"},
      {"array_count", kCkptHead + u64(0) + u64(uint64_t{1} << 59) + arr, "array count"},
      {"array_name", kCkptHead + u64(0) + u64(1) + u64(1000) + std::string(40, 'w'),
       "array entry 0 of 1"},
      {"dtype", kCkptHead + u64(0) + u64(1) + named("w") + u64(10) + u64(0) + u64(2) + "ab",
       "dtype code 10"},
      {"rank", kCkptHead + u64(0) + u64(1) + named("w") + u64(6) + u64(1000) + u64(0) + u64(0),
       "rank 1000"},
      {"negative_dim",
       kCkptHead + u64(0) + u64(1) + named("w") + u64(6) + u64(1) + u64(~uint64_t{0}) + u64(4),
       "negative"},
      {"overflow",
       kCkptHead + u64(0) + u64(1) + named("w") + u64(6) + u64(2) + u64(uint64_t{1} << 40) +
           u64(uint64_t{1} << 40) + u64(0),
       "too large"},
      {"byte_count_mismatch",
       kCkptHead + u64(0) + u64(1) + named("w") + u64(6) + u64(1) + u64(2) + u64(7) +
           std::string(7, '\0'),
       "takes 8 bytes, the entry says 7"},
      {"trailing", kCkptHead + u64(0) + u64(1) + arr + "zz", "2 bytes follow the last entry"},
      {"duplicate", kCkptHead + u64(0) + u64(2) + arr + arr, "appears twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string msg = ckpt_error(c.name + ".ckpt", with_crc(c.body));
    expect_contains(msg, "load_checkpoint(" + tmp(c.name + ".ckpt") + ")");
    expect_contains(msg, c.expect);
  }
  // And a well-formed crafted file loads.
  nn::Checkpoint ok = io::parse_checkpoint(with_crc(kCkptHead + u64(0) + u64(1) + arr), "mem");
  EXPECT_EQ(ok.arrays.at("w").shape(), Shape{2});
}

// ---- 16. IDX: gzip bombs and sizes ------------------------------------------------------------
std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// Writes path as gzip(header for a (10,) byte array + 10 bytes + `extra` zero bytes), compressed
// in a stream by Python so that neither side holds the inflated data.
void write_gzip_idx(const std::string& path, long long data_bytes) {
  std::string script = tmp("gz.py");
  std::ofstream(script) << "import gzip, sys\n"
                        << "with gzip.open(sys.argv[1], 'wb', compresslevel=9) as f:\n"
                        << "    f.write(bytes([0, 0, 8, 1, 0, 0, 0, 10]))\n"
                        << "    left = int(sys.argv[2])\n"
                        << "    chunk = bytes(1 << 20)\n"
                        << "    while left > 0:\n"
                        << "        f.write(chunk[:min(left, len(chunk))])\n"
                        << "        left -= len(chunk)\n";
  std::string cmd =
      std::string(SPMD_PYTHON) + " " + script + " " + path + " " + std::to_string(data_bytes);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(IdxSizes, GzipBombIsNotInflatedWhole) {
  // Header: 10 elements; the stream inflates to 256 MiB of zeros (a file of about 250 KB).
  write_gzip_idx(tmp("bomb.idx.gz"), 256ll << 20);
  ASSERT_LT(read_bytes(tmp("bomb.idx.gz")).size(), 2u << 20);
  long before = peak_rss_mib();
  std::string msg = error_of([] { load_idx(tmp("bomb.idx.gz")); });
  EXPECT_LT(peak_rss_mib() - before, 64) << "the loader inflated the whole stream";
  expect_contains(msg, "bomb.idx.gz");
  expect_contains(msg, "trailing data");
  expect_contains(msg, "(10,)");
}

TEST(IdxSizes, GzipDataMustMatchTheHeaderExactly) {
  write_gzip_idx(tmp("exact.idx.gz"), 10);
  Array a = load_idx(tmp("exact.idx.gz"));
  EXPECT_EQ(a.shape(), Shape{10});
  EXPECT_EQ(sum(a).item<int32_t>(), 0);
  write_gzip_idx(tmp("short.idx.gz"), 9);
  std::string msg = error_of([] { load_idx(tmp("short.idx.gz")); });
  expect_contains(msg, "truncated data");
  expect_contains(msg, "got 9");
  write_gzip_idx(tmp("long.idx.gz"), 11);
  expect_contains(error_of([] { load_idx(tmp("long.idx.gz")); }), "trailing data");
  // Two gzip members back to back (cat a.gz b.gz) are one file, as gzip -d reads them.
  write_gzip_idx(tmp("part.idx.gz"), 4);
  std::string first = read_bytes(tmp("part.idx.gz"));
  std::string script = tmp("gz6.py");
  std::ofstream(script) << "import gzip, sys\nsys.stdout.buffer.write(gzip.compress(bytes(6)))\n";
  std::string cmd = std::string(SPMD_PYTHON) + " " + script + " > " + tmp("six.gz");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  write_bytes(tmp("members.idx.gz"), first + read_bytes(tmp("six.gz")));
  EXPECT_EQ(load_idx(tmp("members.idx.gz")).shape(), Shape{10});
  write_bytes(tmp("garbage.idx.gz"), read_bytes(tmp("exact.idx.gz")) + "junk");
  expect_contains(error_of([] { load_idx(tmp("garbage.idx.gz")); }), "trailing garbage");
}

TEST(IdxSizes, PlainFilesAreCheckedBeforeAllocating) {
  std::string header = std::string("\0\0\x08\x02", 4) + be32(65536) + be32(65536);  // 4 GiB
  write_bytes(tmp("claims.idx"), header + "abc");
  long before = peak_rss_mib();
  std::string msg = error_of([] { load_idx(tmp("claims.idx")); });
  EXPECT_LT(peak_rss_mib() - before, 64);
  expect_contains(msg, "expected 4294967296 bytes");
  expect_contains(msg, "got 3");
  std::string ten = std::string("\0\0\x08\x01", 4) + be32(10);
  write_bytes(tmp("long.idx"), ten + std::string(11, '\x01'));
  expect_contains(error_of([] { load_idx(tmp("long.idx")); }), "trailing data");
  write_bytes(tmp("ok.idx"), ten + std::string(10, '\x01'));
  EXPECT_EQ(sum(load_idx(tmp("ok.idx"))).item<int32_t>(), 10);
}

// ---- 16. saves are atomic ----------------------------------------------------------------------
TEST(AtomicSave, EverySaverReplacesTheFileOnlyWhenTheNewOneIsComplete) {
  // A directory where the temporary file goes makes the write fail: the old file must survive
  // (save_idx wrote in place before).
  Array a = Array(std::vector<int32_t>{1, 2, 3}, Shape{3});
  Array b = Array(std::vector<int32_t>{9, 9, 9, 9}, Shape{4});
  std::string idx = tmp("keep.idx"), npy_path = tmp("keep.npy"), ckpt = tmp("keep.ckpt");
  save_idx(idx, a);
  save_npy(npy_path, a);
  nn::Checkpoint c;
  c.arrays["a"] = a;
  nn::save_checkpoint(ckpt, c);
  for (const std::string& p : {idx, npy_path, ckpt})
    std::filesystem::create_directories(p + ".tmp");
  EXPECT_THROW(save_idx(idx, b), Error);
  EXPECT_THROW(save_npy(npy_path, b), Error);
  nn::Checkpoint d;
  d.arrays["a"] = b;
  EXPECT_THROW(nn::save_checkpoint(ckpt, d), Error);
  for (const std::string& p : {idx, npy_path, ckpt}) std::filesystem::remove_all(p + ".tmp");
  EXPECT_EQ(load_idx(idx).to_vector<int32_t>(), a.to_vector<int32_t>());
  EXPECT_EQ(load_npy(npy_path).to_vector<int32_t>(), a.to_vector<int32_t>());
  EXPECT_EQ(nn::load_checkpoint(ckpt).arrays.at("a").to_vector<int32_t>(), a.to_vector<int32_t>());
  // A successful save leaves no temporary file behind.
  save_idx(idx, b);
  EXPECT_EQ(load_idx(idx).to_vector<int32_t>(), b.to_vector<int32_t>());
  EXPECT_FALSE(std::filesystem::exists(idx + ".tmp"));
}

}  // namespace
}  // namespace spmd
