// NumPy .npy reading and writing.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "spmd/error.h"
#include "spmd/io.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

const char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  switch (t) {
    case DType::Bool:
      return "|b1";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::UInt32:
      return "<u4";
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    default:
      fail("save_npy: dtype ", dtype_name(t), " cannot be saved");
  }
}

DType dtype_of_descr(const std::string& d, bool& swap, const std::string& path) {
  if (d.size() < 3) fail("load_npy(", path, "): unsupported dtype descriptor '", d, "'");
  char order = d[0];
  std::string kind = d.substr(1);
  swap = order == '>' && kind != "b1";
  if (kind == "b1") return DType::Bool;
  if (kind == "i4") return DType::Int32;
  if (kind == "i8") return DType::Int64;
  if (kind == "u4") return DType::UInt32;
  if (kind == "f4") return DType::Float32;
  if (kind == "f8") return DType::Float64;
  fail("load_npy(", path, "): unsupported dtype '", d,
       "'; expected one of bool, int32, int64, uint32, float32, float64");
}

// The value of 'key' in the header's Python dict literal.
std::string field(const std::string& header, const std::string& key, const std::string& path) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos)
    fail("load_npy(", path, "): corrupt header, no '", key, "' in ", header);
  auto colon = header.find(':', k);
  if (colon == std::string::npos) fail("load_npy(", path, "): corrupt header: ", header);
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail("load_npy(", path, "): corrupt header: ", header);
  char open = header[start];
  size_t end;
  if (open == '\'') {
    end = header.find('\'', start + 1);
    if (end == std::string::npos) fail("load_npy(", path, "): corrupt header: ", header);
    return header.substr(start + 1, end - start - 1);
  }
  if (open == '(') {
    end = header.find(')', start);
    if (end == std::string::npos) fail("load_npy(", path, "): corrupt header: ", header);
    return header.substr(start, end - start + 1);
  }
  end = header.find_first_of(",}", start);
  return header.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

Shape parse_shape(const std::string& tuple, const std::string& path) {
  Shape s;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      s.push_back(v);
    } catch (const std::exception&) {
      fail("load_npy(", path, "): corrupt shape ", tuple);
    }
  }
  return s;
}

}  // namespace

void save_npy(const std::string& path, const Array& x) {
  std::string shape = "(";
  for (size_t i = 0; i < x.shape().size(); ++i) shape += std::to_string(x.shape()[i]) + ", ";
  if (x.ndim() > 1)
    shape.resize(shape.size() - 2);
  else if (x.ndim() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      "{'descr': '" + descr_of(x.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  const void* data = x.data();
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail("save_npy: cannot open '", path, "' for writing");
    out.write(kMagic, 6);
    char version[2] = {1, 0};
    out.write(version, 2);
    uint16_t len = static_cast<uint16_t>(header.size());
    char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(lenb, 2);
    out << header;
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(x.nbytes()));
    if (!out) fail("save_npy: writing '", path, "' failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    fail("save_npy: cannot move the file into '", path, "'");
}

Array load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("load_npy: cannot open '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    fail("load_npy(", path, "): not a .npy file (expected the magic string \\x93NUMPY)");
  int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail("load_npy(", path, "): truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    fail("load_npy(", path, "): unsupported format version ", major, "; expected 1, 2 or 3");
  }
  if (bytes.size() < header_start + header_len)
    fail("load_npy(", path, "): truncated header: expected ", header_len,
         " header bytes, the file has ", bytes.size() - std::min(bytes.size(), header_start));
  std::string header = bytes.substr(header_start, header_len);
  bool swap = false;
  DType dt = dtype_of_descr(field(header, "descr", path), swap, path);
  bool fortran = field(header, "fortran_order", path) == "True";
  Shape shape = parse_shape(field(header, "shape", path), path);
  size_t expected = static_cast<size_t>(itemsize(dt));
  bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  for (int64_t d : shape)
    if (!empty && __builtin_mul_overflow(expected, static_cast<size_t>(d), &expected))
      fail("load_npy(", path, "): corrupt header: shape ", shape_str(shape), " is too large");
  if (empty) expected = 0;
  size_t have = bytes.size() - header_start - header_len;
  if (have < expected)
    fail("load_npy(", path, "): truncated data: expected ", expected, " bytes for shape ",
         shape_str(shape), " of ", dtype_name(dt), ", got ", have);
  char* data = bytes.data() + header_start + header_len;
  if (swap) {
    int w = itemsize(dt);
    for (size_t i = 0; i < expected; i += w) std::reverse(data + i, data + i + w);
  }
  if (!fortran) return Array(data, shape, dt);
  Shape reversed(shape.rbegin(), shape.rend());
  return transpose(Array(data, reversed, dt));
}

}  // namespace spmd
