// safetensors files: round trips of every dtype spmd writes; the exact bytes the reference
// implementation's own tests expect (huggingface/safetensors, safetensors/src/tensor.rs); files
// hand-assembled by Python (numpy + json + struct, Debian's /usr/bin/python3) read here, and ours
// read there; sharded loads (make_array_from_callback out of the mapping) against the whole
// tensors, block by block; and every malformed header or layout an spmd::Error naming the file
// and the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

// Eight CPU devices for every test (the sharded loads need them), fixed before any test runs, so
// the binary runs whole as well as one ctest process per test.
class EightDevices : public ::testing::Environment {
 public:
  void SetUp() override { set_cpu_device_count(8); }
};
[[maybe_unused]] ::testing::Environment* const kEightDevices =
    ::testing::AddGlobalTestEnvironment(new EightDevices);

std::string tmp(const std::string& name) {
  return test_util::scratch_path("safetensors_test", name);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s;
}

// A file of this header (its length in front) and data buffer.
std::string file_of(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

std::string raw(const Array& a) {
  return std::string(static_cast<const char*>(a.data()), a.nbytes());
}

// ---- round trips ----------------------------------------------------------------------------

TEST(Safetensors, RoundTripOfEveryDtypeAndShape) {
  std::map<std::string, Array> t;
  t["f32"] = Array(std::vector<float>{0.1f, -2.5f, 3e-8f, 1e30f, -0.0f, 7.f}, Shape{2, 3});
  t["f64"] = Array(std::vector<double>{1.0 / 3, -1e300, 0.0, 2.5}, Shape{4});
  t["i32"] = Array(std::vector<int32_t>{1, -2, 3, -4, 5, -6, 7, INT32_MIN}, Shape{2, 2, 2});
  t["i64/scalar"] = Array(int64_t{-(int64_t{1} << 62)});
  t["u32"] = Array(std::vector<uint32_t>{0, 1, 4294967295u}, Shape{3});
  t["bool"] = Array(std::vector<bool>{true, false, true, true, false}, Shape{5});
  t["f16"] = astype(Array(std::vector<float>{0.5f, -1.f, 65504.f, 0.f}, Shape{2, 2}), float16);
  t["bf16"] = astype(Array(std::vector<float>{1.f, -3.140625f, 1e38f}, Shape{3}), bfloat16);
  t["c64"] = Array(std::vector<std::complex<float>>{{1, 2}, {-0.5f, 0}}, Shape{2});
  t["empty"] = Array(std::vector<float>{}, Shape{0, 3});
  t["empty3d"] = Array(std::vector<int32_t>{}, Shape{2, 0, 4});
  t["one"] = Array(std::vector<float>{42.f}, Shape{1, 1, 1});
  t["name with spaces and ü"] = Array(std::vector<int32_t>{9}, Shape{});
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "héllo \"world\""}};
  save_safetensors(tmp("all.safetensors"), t, meta);
  EXPECT_FALSE(std::filesystem::exists(tmp("all.safetensors.tmp")));

  auto back = load_safetensors(tmp("all.safetensors"));
  ASSERT_EQ(back.size(), t.size());
  for (const auto& [name, a] : t) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(back.count(name));
    const Array& b = back.at(name);
    EXPECT_EQ(b.dtype(), a.dtype());
    EXPECT_EQ(b.shape(), a.shape());
    EXPECT_EQ(raw(b), raw(a));
  }
  EXPECT_EQ(safetensors_metadata(tmp("all.safetensors")), meta);
  // No metadata: none written, none read.
  save_safetensors(tmp("nometa.safetensors"), {{"x", Array(1.5f)}});
  EXPECT_TRUE(safetensors_metadata(tmp("nometa.safetensors")).empty());
  EXPECT_EQ(read_bytes(tmp("nometa.safetensors")).find("__metadata__"), std::string::npos);
  EXPECT_FLOAT_EQ(load_safetensors(tmp("nometa.safetensors")).at("x").item<float>(), 1.5f);
}

TEST(Safetensors, LayoutIsHeaderPaddedToEightThenTensorsInNameOrder) {
  save_safetensors(tmp("layout.safetensors"), {{"b", Array(std::vector<int32_t>{1, 2}, Shape{2})},
                                               {"a", Array(std::vector<double>{0.5}, Shape{1})},
                                               {"c", Array(std::vector<bool>{true}, Shape{1})}});
  std::string f = read_bytes(tmp("layout.safetensors"));
  ASSERT_GE(f.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(f[i])} << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(f.size(), 8 + n + 8 + 8 + 1);
  std::string header = f.substr(8, n);
  EXPECT_EQ(header,
            std::string("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                        "\"c\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[16,17]}}")
                .append(n - header.find_last_of('}') - 1, ' '));
  double half = 0;
  std::memcpy(&half, f.data() + 8 + n, 8);
  EXPECT_EQ(half, 0.5);
  EXPECT_EQ(f.back(), '\x01');
}

// The byte-exact outputs of the reference implementation's tests (safetensors/src/tensor.rs:
// test_serialization and test_empty), written here by save_safetensors and read back.
TEST(Safetensors, BytesMatchTheReferenceImplementation) {
  const std::vector<uint8_t> serialization = {
      64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
      34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
      44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
      44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
      91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
      0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
  save_safetensors(tmp("ref.safetensors"),
                   {{"attn.0", Array(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{1, 2, 3})}});
  EXPECT_EQ(read_bytes(tmp("ref.safetensors")),
            std::string(serialization.begin(), serialization.end()));
  write_bytes(tmp("ref2.safetensors"), std::string(serialization.begin(), serialization.end()));
  Array a = load_safetensors(tmp("ref2.safetensors")).at("attn.0");
  EXPECT_EQ(a.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));

  const std::vector<uint8_t> empty = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  save_safetensors(tmp("empty.safetensors"), {});
  EXPECT_EQ(read_bytes(tmp("empty.safetensors")), std::string(empty.begin(), empty.end()));
  EXPECT_TRUE(load_safetensors(tmp("empty.safetensors")).empty());

  const std::vector<uint8_t> empty_meta = {
      40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
      100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
      111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
  save_safetensors(tmp("empty_meta.safetensors"), {}, {{"framework", "pt"}});
  EXPECT_EQ(read_bytes(tmp("empty_meta.safetensors")),
            std::string(empty_meta.begin(), empty_meta.end()));
  EXPECT_EQ(safetensors_metadata(tmp("empty_meta.safetensors")),
            (std::map<std::string, std::string>{{"framework", "pt"}}));
}

// ---- files written and read by Python -------------------------------------------------------

// Values as Python prints them: "name|dtype|d0 d1|v0 v1 ..." per tensor (complex numbers as real
// and imaginary parts in turn).
struct PyTensor {
  std::string dtype;
  Shape shape;
  std::vector<double> values;
};

std::map<std::string, PyTensor> parse_py(const std::string& out) {
  std::map<std::string, PyTensor> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string part; std::getline(ls, part, '|');) f.push_back(part);
    if (f.size() < 3) continue;
    if (f.size() == 3) f.push_back("");
    PyTensor t;
    t.dtype = f[1];
    std::istringstream ds(f[2]), vs(f[3]);
    for (int64_t d; ds >> d;) t.shape.push_back(d);
    for (std::string v; vs >> v;) t.values.push_back(std::stod(v));
    r[f[0]] = t;
  }
  return r;
}

std::vector<double> values_of(const Array& a) {
  if (a.dtype() == DType::Complex64) {
    const float* p = a.data<float>();
    return std::vector<double>(p, p + 2 * a.size());
  }
  return a.to_vector<double>();
}

TEST(Safetensors, FileAssembledByPythonLoads) {
  // Independent of save_safetensors: the header is Python's json.dumps (spaces after separators,
  // \u escapes, keys in no particular order), the data in an order other than the names' and
  // not aligned, and a bool byte of 2 and 255 (True).
  const std::string path = tmp("py.safetensors");
  std::string out = test_util::run_numpy("safetensors_test", "write", R"PY(
import json, struct
t = {}
t["weight"] = ("F32", np.arange(12, dtype="<f4").reshape(3, 4) * np.float32(0.5) - np.float32(1))
t["bias"] = ("F64", np.array([1 / 3, -2.5, 1e300, -0.0], dtype="<f8"))
t["ids"] = ("I64", np.array([[1, -2, 3], [2**62, -2**63, 0]], dtype="<i8"))
t["count"] = ("I32", np.array(-7, dtype="<i4"))
t["u"] = ("U32", np.array([0, 4294967295, 5], dtype="<u4"))
t["mask"] = ("BOOL", np.array([1, 0, 2, 255], dtype="u1"))
t["half"] = ("F16", np.array([[0.5, -1.0], [65504, 2.0**-24]], dtype="<f2"))
t["bf"] = ("BF16", (np.array([1.0, -3.140625, 1e38], dtype="<f4").view("<u4") >> 16).astype("<u2"))
t["z"] = ("C64", np.array([1 + 2j, -0.5j], dtype="<c8"))
t["empty"] = ("F32", np.zeros((0, 5), dtype="<f4"))
header = {}
data = b""
for name in ["mask", "bf", "z", "empty", "weight", "count", "half", "u", "ids", "bias"]:
    dtype, a = t[name]
    b = a.tobytes()
    header[name] = {"shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)],
                    "dtype": dtype}
    data += b
header["__metadata__"] = {"format": "np", "note": "h\u00e9llo"}
h = json.dumps(header).encode()
with open(")PY" + path + R"PY(", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
for name, (dtype, a) in sorted(t.items()):
    if dtype == "BOOL":
        v = (a != 0).astype(float).ravel()
    elif dtype == "BF16":
        v = (a.astype("<u4") << 16).view("<f4").astype(float).ravel()
    elif dtype == "C64":
        v = a.view("<f4").astype(float).ravel()
    else:
        v = a.ravel()
    print(name + "|" + dtype + "|" + " ".join(str(d) for d in a.shape) + "|" +
          " ".join(repr(float(x)) if dtype != "I64" else str(int(x)) for x in v.tolist()))
)PY");
  auto want = parse_py(out);
  ASSERT_EQ(want.size(), 10u) << out;
  const std::map<std::string, DType> dtypes = {
      {"F32", float32}, {"F64", float64}, {"I64", int64},     {"I32", int32},    {"U32", uint32},
      {"BOOL", bool_},  {"F16", float16}, {"BF16", bfloat16}, {"C64", complex64}};
  auto got = load_safetensors(path);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.count(name));
    const Array& a = got.at(name);
    EXPECT_EQ(a.dtype(), dtypes.at(w.dtype));
    EXPECT_EQ(a.shape(), w.shape);
    EXPECT_EQ(values_of(a), w.values);
  }
  EXPECT_EQ(got.at("ids").to_vector<int64_t>(),
            (std::vector<int64_t>{1, -2, 3, int64_t{1} << 62, INT64_MIN, 0}));
  EXPECT_EQ(raw(got.at("mask")), std::string("\x01\x00\x01\x01", 4));  // normalised to 0/1
  EXPECT_EQ(safetensors_metadata(path),
            (std::map<std::string, std::string>{{"format", "np"}, {"note", "h\xc3\xa9llo"}}));
}

TEST(Safetensors, SavedFileReadByPython) {
  const std::string path = tmp("for_py.safetensors");
  save_safetensors(
      path,
      {{"w", Array(std::vector<float>{1.5f, -2.f, 0.25f, 8.f, 1e-3f, -0.f}, Shape{3, 2})},
       {"n", Array(int64_t{-5})},
       {"m", Array(std::vector<bool>{false, true, true}, Shape{3})},
       {"h", astype(Array(std::vector<float>{0.5f, 3.f}, Shape{2}), float16)},
       {"e", Array(std::vector<double>{}, Shape{0})}},
      {{"step", "12"}});
  // Python checks the layout rules itself (length, padding, contiguous offsets in name order,
  // nothing after the last tensor) and prints each tensor as numpy decodes it.
  std::string out = test_util::run_numpy("safetensors_test", "read", R"PY(
import json, struct
raw = open(")PY" + path + R"PY(", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
assert n % 8 == 0, n
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = h.pop("__metadata__")
print("meta|" + json.dumps(meta, sort_keys=True))
types = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "BOOL": "?", "F16": "<f2"}
end = 0
for name in sorted(h):
    e = h[name]
    b, s = e["data_offsets"]
    assert b == end, (name, b, end)
    end = s
    a = np.frombuffer(data[b:s], dtype=types[e["dtype"]]).reshape(e["shape"])
    print(name + "|" + e["dtype"] + "|" + " ".join(str(d) for d in a.shape) + "|" +
          " ".join(repr(float(x)) for x in a.ravel().tolist()))
assert end == len(data), (end, len(data))
)PY");
  EXPECT_THAT(out, HasSubstr("meta|{\"step\": \"12\"}"));
  auto got = parse_py(out);
  ASSERT_EQ(got.count("w"), 1u) << out;
  EXPECT_EQ(got["w"].dtype, "F32");
  EXPECT_EQ(got["w"].shape, (Shape{3, 2}));
  std::vector<double> w;
  for (float f : {1.5f, -2.f, 0.25f, 8.f, 1e-3f, -0.f}) w.push_back(f);
  EXPECT_EQ(got["w"].values, w);
  EXPECT_EQ(got["n"].dtype, "I64");
  EXPECT_EQ(got["n"].shape, Shape{});
  EXPECT_EQ(got["n"].values, std::vector<double>{-5});
  EXPECT_EQ(got["m"].dtype, "BOOL");
  EXPECT_EQ(got["m"].values, (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(got["h"].dtype, "F16");
  EXPECT_EQ(got["h"].values, (std::vector<double>{0.5, 3}));
  EXPECT_EQ(got["e"].dtype, "F64");
  EXPECT_EQ(got["e"].shape, Shape{0});
}

// ---- sharded loads --------------------------------------------------------------------------

// The bytes of block `index` of a row-major array, element by element.
std::string block_bytes(const Array& whole, const Index& index) {
  const Shape& s = whole.shape();
  const size_t w = static_cast<size_t>(itemsize(whole.dtype()));
  const char* p = static_cast<const char*>(whole.data());
  std::string out;
  for (int64_t flat = 0; flat < whole.size(); ++flat) {
    std::vector<int64_t> at = test_util::unravel(flat, s);
    bool in = true;
    for (size_t d = 0; d < s.size(); ++d)
      in = in && index[d].first <= at[d] && at[d] < index[d].second;
    if (in) out.append(p + static_cast<size_t>(flat) * w, w);
  }
  return out;
}

Array counting(const Shape& shape, DType dtype) {
  std::vector<double> v(static_cast<size_t>(shape_size(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 251) - 100;
  return astype(Array(v, shape), dtype);
}

TEST(SafetensorsSharded, EachBlockIsItsSliceOfTheWholeTensor) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  std::map<std::string, Array> t;
  t["w"] = counting({8, 12}, float32);
  t["cube"] = counting({4, 8, 3}, float64);  // the trailing dimension whole: longer runs
  t["cols"] = counting({6, 8}, int32);
  t["rep"] = counting({5, 3}, bfloat16);
  t["mask"] =
      Array(std::vector<bool>{true, false, false, true, true, true, false, true}, Shape{2, 4});
  t["scalar"] = Array(2.5f);
  t["empty"] = counting({0, 4}, float32);
  t["whole"] = counting({3, 7}, int64);  // no layout: loaded whole
  save_safetensors(tmp("sharded.safetensors"), t);

  const std::map<std::string, NamedSharding> layouts = {
      {"w", NamedSharding(mesh, P("data", "model"))},
      {"cube", NamedSharding(mesh, P("data", "model"))},
      {"cols", NamedSharding(mesh, P(none, "model"))},
      {"rep", NamedSharding(mesh, P())},
      {"mask", NamedSharding(mesh, P("data", "model"))},
      {"scalar", NamedSharding(mesh, P())},
      {"empty", NamedSharding(mesh, P(none, "model"))}};
  auto got = load_safetensors(tmp("sharded.safetensors"), layouts);
  ASSERT_EQ(got.size(), t.size());
  for (const auto& [name, layout] : layouts) {
    SCOPED_TRACE(name);
    const Array& a = got.at(name);
    EXPECT_EQ(a.sharding(), Sharding(layout));
    EXPECT_EQ(a.dtype(), t.at(name).dtype());
    EXPECT_EQ(a.shape(), t.at(name).shape());
    auto shards = a.addressable_shards();
    ASSERT_EQ(shards.size(), 8u);
    const std::vector<Index> want = layout.indices(t.at(name).shape());
    for (size_t i = 0; i < shards.size(); ++i) {
      EXPECT_EQ(shards[i].index, want[i]);
      EXPECT_EQ(shards[i].data.shape(), layout.shard_shape(t.at(name).shape()));
      EXPECT_EQ(raw(shards[i].data), block_bytes(t.at(name), shards[i].index)) << i;
    }
    EXPECT_EQ(raw(a), raw(t.at(name)));
  }
  EXPECT_EQ(got.at("whole").sharding().kind(), Sharding::Kind::SingleDevice);
  EXPECT_EQ(raw(got.at("whole")), raw(t.at("whole")));
}

TEST(SafetensorsSharded, MissingTensorAndMisfitLayoutsAreErrors) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  save_safetensors(tmp("misfit.safetensors"), {{"w", counting({6, 8}, float32)}});
  const std::string path = tmp("misfit.safetensors");
  std::string e = error_of([&] {
    load_safetensors(path, {{"v", NamedSharding(mesh, P("data"))}});
  });
  EXPECT_THAT(e, HasSubstr("load_safetensors(" + path + ")"));
  EXPECT_THAT(e, HasSubstr("layout is given for the tensor 'v', which the file"));
  e = error_of([&] { load_safetensors(path, {{"w", NamedSharding(mesh, P("model"))}}); });
  EXPECT_THAT(e, HasSubstr("tensor 'w'"));
  EXPECT_THAT(e, HasSubstr("should be divisible by 4, but it is equal to 6"));
  e = error_of([&] {
    load_safetensors(path, {{"w", NamedSharding(mesh, P(none, none, "data"))}});
  });
  EXPECT_THAT(e, HasSubstr("has a spec of length 3, but the array has rank 2"));
}

// ---- saving errors --------------------------------------------------------------------------

TEST(Safetensors, SaveRefusesWhatTheFormatCannotHold) {
  EXPECT_THAT(error_of([&] {
                save_safetensors(
                    tmp("c128.safetensors"),
                    {{"z", Array(std::vector<std::complex<double>>{{1, 2}}, Shape{1})}});
              }),
              HasSubstr("tensor 'z' is complex128, which safetensors has no dtype for"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(tmp("m.safetensors"), {{"__metadata__", Array(1.f)}});
              }),
              HasSubstr("may not be named \"__metadata__\""));
  EXPECT_THAT(error_of([&] {
                save_safetensors(tmp("e.safetensors"), {{"x", Array()}});
              }),
              HasSubstr("tensor 'x' is an empty (default) Array"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(tmp("u.safetensors"), {{std::string("\xff\xfe"), Array(1.f)}});
              }),
              HasSubstr("valid UTF-8"));
  EXPECT_THAT(error_of([&] { save_safetensors("/nonexistent-dir/x.safetensors", {}); }),
              HasSubstr("cannot open '/nonexistent-dir/x.safetensors.tmp'"));
  // Under jit the argument is a tracer: its data cannot be read.
  std::string e;
  jit([&](const Array& x) {
    e = error_of([&] { save_safetensors(tmp("t.safetensors"), {{"x", x}}); });
    return x;
  })(Array(1.f));
  EXPECT_THAT(e, HasSubstr("save_safetensors(" + tmp("t.safetensors") + "): tensor 'x'"));
}

// ---- malformed files ------------------------------------------------------------------------

// The message of loading these bytes from a file; it must name the file.
std::string load_error(const std::string& bytes) {
  const std::string path = tmp("bad.safetensors");
  write_bytes(path, bytes);
  std::string e = error_of([&] { load_safetensors(path); });
  EXPECT_THAT(e, HasSubstr("load_safetensors(" + path + "): ")) << e;
  return e;
}

const std::string kEntry = R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
const std::string kData(24, '\0');

TEST(SafetensorsHostile, WellFormedBaseCaseLoads) {
  write_bytes(tmp("good.safetensors"), file_of("{" + kEntry + "}", kData));
  EXPECT_EQ(load_safetensors(tmp("good.safetensors")).at("w").shape(), (Shape{2, 3}));
  // Whitespace after the object (the reference pads with spaces) and inside it.
  write_bytes(tmp("good2.safetensors"),
              file_of("{ \"w\" : {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": "
                      "[0, 24]} }\n\t ",
                      kData));
  EXPECT_EQ(load_safetensors(tmp("good2.safetensors")).at("w").shape(), (Shape{2, 3}));
}

TEST(SafetensorsHostile, MissingFileAndDirectory) {
  EXPECT_THAT(error_of([&] { load_safetensors(tmp("nope.safetensors")); }),
              HasSubstr("cannot open"));
  EXPECT_THAT(error_of([&] { load_safetensors(SPMD_TEST_TMP); }), HasSubstr("directory"));
  EXPECT_THAT(error_of([&] { safetensors_metadata(tmp("nope.safetensors")); }),
              HasSubstr("safetensors_metadata: cannot open"));
}

TEST(SafetensorsHostile, HeaderLength) {
  EXPECT_THAT(load_error(""), HasSubstr("it has 0 bytes, fewer than the 8 of the header length"));
  EXPECT_THAT(load_error(std::string("\x02\0\0", 3)), HasSubstr("it has 3 bytes"));
  EXPECT_THAT(load_error(le64(100'000'001) + "{}"),
              HasSubstr("100000001 bytes, more than the limit of 100000000"));
  EXPECT_THAT(load_error(le64(~uint64_t{0}) + "{}"), HasSubstr("more than the limit"));
  EXPECT_THAT(load_error(le64(50) + "{}"),
              HasSubstr("truncated header: the header length says 50 bytes, the file has 2"));
  EXPECT_THAT(load_error(le64(0)), HasSubstr("expected a JSON object starting with '{'"));
}

TEST(SafetensorsHostile, HeaderIsNotTheFormatsJson) {
  EXPECT_THAT(load_error(file_of(" {}")), HasSubstr("starting with '{', got \" {}\""));
  EXPECT_THAT(load_error(file_of("[]")), HasSubstr("starting with '{'"));
  EXPECT_THAT(load_error(file_of("{\"w\":")), HasSubstr("the header is not valid JSON"));
  EXPECT_THAT(load_error(file_of("{} x")), HasSubstr("the header is not valid JSON"));
  EXPECT_THAT(load_error(file_of("{}{}")), HasSubstr("the header is not valid JSON"));
  // Invalid UTF-8 is invalid JSON, and the message quotes the byte escaped.
  const std::string utf8 = load_error(file_of("{\"\xff\":1}"));
  EXPECT_THAT(utf8, HasSubstr("the header is not valid JSON"));
  EXPECT_THAT(utf8, HasSubstr("\\xff"));
  EXPECT_EQ(utf8.find('\xff'), std::string::npos) << utf8;
  EXPECT_THAT(load_error(file_of("{\"w\":3}")),
              HasSubstr("the entry of tensor 'w' must be an object {\"dtype\""));
  EXPECT_THAT(load_error(file_of("{\"w\":[]}")), HasSubstr("must be an object"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                                 "\"extra\":1}}",
                                 "abcd")),
              HasSubstr("tensor 'w' has the unexpected key 'extra'"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}")),
              HasSubstr("tensor 'w' has no \"data_offsets\""));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}")),
              HasSubstr("tensor 'w' has the key 'dtype' twice"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"dtype\":4}}")),
              HasSubstr("'dtype' of tensor 'w' must be a string such as \"F32\", got 4"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"shape\":{}}}")),
              HasSubstr("'shape' of tensor 'w' must be an array of non-negative integers"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"data_offsets\":[0,4,8]}}")),
              HasSubstr("'data_offsets' of tensor 'w' has more than 2 numbers"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"data_offsets\":[0]}}")),
              HasSubstr("'data_offsets' of tensor 'w' has 1 numbers; expected [begin, end]"));
  EXPECT_THAT(load_error(file_of("{\"w\":{\"data_offsets\":[0,\"4\"]}}")),
              HasSubstr("'data_offsets' of tensor 'w' must hold non-negative integers"));
  EXPECT_THAT(load_error(file_of("{\"__metadata__\":{\"k\":1}}")),
              HasSubstr("the value of 'k' in \"__metadata__\" must be a string, got 1"));
  EXPECT_THAT(load_error(file_of("{\"__metadata__\":[\"k\"]}")),
              HasSubstr("\"__metadata__\" must be an object of strings"));
  EXPECT_THAT(load_error(file_of("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}")),
              HasSubstr("the key 'k' appears twice in __metadata__"));
  // Deep nesting stops at the first level the format does not have.
  EXPECT_THAT(load_error(file_of("{\"w\":{\"shape\":" + std::string(100000, '[') + "}}")),
              HasSubstr("'shape' of tensor 'w' must hold non-negative integers, got an array"));
}

TEST(SafetensorsHostile, DuplicateNames) {
  EXPECT_THAT(load_error(file_of("{" + kEntry + "," + kEntry + "}", kData)),
              HasSubstr("the name 'w' appears twice in the header"));
  EXPECT_THAT(load_error(file_of("{\"__metadata__\":{},\"__metadata__\":{}}")),
              HasSubstr("the name '__metadata__' appears twice"));
}

TEST(SafetensorsHostile, Dtypes) {
  EXPECT_THAT(load_error(file_of(R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})",
                                 std::string(16, '\0'))),
              HasSubstr("tensor 'w' has the unknown dtype \"F128\"; expected one of BOOL, I32"));
  for (const char* d : {"U8", "I8", "U16", "I16", "U64", "F8_E4M3"}) {
    SCOPED_TRACE(d);
    EXPECT_THAT(load_error(file_of(std::string(R"({"w":{"dtype":")") + d +
                                   R"(","shape":[0],"data_offsets":[0,0]}})")),
                HasSubstr(std::string("has dtype \"") + d + "\", which spmd does not support"));
  }
}

TEST(SafetensorsHostile, Shapes) {
  EXPECT_THAT(load_error(file_of(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})")),
              HasSubstr("'shape' of tensor 'w' must hold non-negative integers, got -1"));
  EXPECT_THAT(load_error(file_of(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})")),
              HasSubstr("must hold non-negative integers, got 1.5"));
  EXPECT_THAT(load_error(file_of(
                  R"({"w":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,0]}})")),
              HasSubstr("must hold non-negative integers, got 18446744073709551616"));
  EXPECT_THAT(load_error(file_of(
                  R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,0]}})")),
              HasSubstr("has the dimension 9223372036854775808, which is too large"));
  EXPECT_THAT(
      load_error(
          file_of(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})")),
      HasSubstr("tensor 'w' has shape (4611686018427387904, 4) of F32, which is too large"));
  // Even with a zero dimension, the others' product must fit (NumPy's rule).
  EXPECT_THAT(
      load_error(file_of(
          R"({"w":{"dtype":"I64","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})")),
      HasSubstr("which is too large"));
  std::string rank65 = "[" + std::string(129, '1') + "]";
  for (size_t i = 1; i < 129; i += 2) rank65[i + 1] = ',';
  EXPECT_THAT(
      load_error(file_of(R"({"w":{"dtype":"F32","shape":)" + rank65 + R"(,"data_offsets":[0,4]}})",
                         std::string(4, '\0'))),
      HasSubstr("has more than 64 dimensions"));
}

TEST(SafetensorsHostile, OffsetsMustBeTheShapesBytesInsideTheBuffer) {
  EXPECT_THAT(
      load_error(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", kData)),
      HasSubstr("tensor 'w' has data_offsets [0, 20] (20 bytes), but its shape (2, 3) of F32 "
                "needs 24 bytes"));
  EXPECT_THAT(
      load_error(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}})", kData)),
      HasSubstr("data_offsets [24, 0], which end before they begin"));
  EXPECT_THAT(
      load_error(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})", kData)),
      HasSubstr("tensor 'w' has data_offsets [8, 32] outside the data buffer, which has 24 bytes"));
  EXPECT_THAT(load_error(file_of(
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})")),
              HasSubstr("end before they begin"));
  EXPECT_THAT(
      load_error(file_of(
          R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})")),
      HasSubstr("outside the data buffer, which has 0 bytes"));
}

TEST(SafetensorsHostile, OverlapsHolesAndTrailingBytes) {
  const std::string a = R"("a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_THAT(
      load_error(file_of("{" + a + R"(,"b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})",
                         std::string(12, '\0'))),
      HasSubstr("tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap"));
  EXPECT_THAT(
      load_error(file_of("{" + a + R"(,"b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                         std::string(8, '\0'))),
      HasSubstr("overlap"));
  // A zero-size tensor inside another one overlaps it too (as the reference rules).
  EXPECT_THAT(
      load_error(file_of("{" + a + R"(,"z":{"dtype":"I32","shape":[0],"data_offsets":[4,4]}})",
                         std::string(8, '\0'))),
      HasSubstr("overlap"));
  EXPECT_THAT(
      load_error(file_of("{" + a + R"(,"b":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}})",
                         std::string(16, '\0'))),
      HasSubstr("bytes [8, 12) of the data buffer belong to no tensor (a hole before tensor 'b'"));
  EXPECT_THAT(load_error(file_of(R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                                 std::string(8, '\0'))),
              HasSubstr("bytes [0, 4) of the data buffer belong to no tensor"));
  EXPECT_THAT(load_error(file_of("{" + a + "}", std::string(9, '\0'))),
              HasSubstr("trailing data: the tensors end at byte 8 of the data buffer, which has 9 "
                        "bytes"));
  EXPECT_THAT(load_error(file_of("{}", "x")),
              HasSubstr("trailing data: the tensors end at byte 0"));
  // Zero-size tensors at the boundaries are fine, as is a file whose tensors are listed out of
  // offset order.
  write_bytes(tmp("zeros.safetensors"),
              file_of(R"({"z2":{"dtype":"F64","shape":[3,0],"data_offsets":[8,8]},)" + a +
                          R"(,"z1":{"dtype":"BOOL","shape":[0],"data_offsets":[0,0]}})",
                      std::string(8, '\x01')));
  auto z = load_safetensors(tmp("zeros.safetensors"));
  EXPECT_EQ(z.at("z2").shape(), (Shape{3, 0}));
  EXPECT_EQ(z.at("a").to_vector<int32_t>(), (std::vector<int32_t>{0x01010101, 0x01010101}));
}

TEST(SafetensorsHostile, MetadataReadsTheSameValidation) {
  const std::string path = tmp("meta_bad.safetensors");
  write_bytes(path, file_of(R"({"__metadata__":{"a":"b"}})", "x"));
  std::string e = error_of([&] { safetensors_metadata(path); });
  EXPECT_THAT(e, HasSubstr("safetensors_metadata(" + path + "): trailing data"));
}

}  // namespace
}  // namespace spmd
