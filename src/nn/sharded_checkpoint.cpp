// Sharded checkpoints (nn.h): one .npy file per distinct block of each array, and a JSON
// manifest (nlohmann::json, Debian's nlohmann-json3-dev: a well-kept header-only library, so the
// format is parsed by code that is not ours) written last by process 0, atomically, once every
// process has written its blocks: a directory with a manifest is a complete checkpoint.
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/array_impl.h"
#include "core/box.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/error.h"
#include "spmd/io.h"
#include "spmd/multihost_utils.h"
#include "spmd/nn.h"
#include "spmd/sharding.h"

namespace spmd::nn {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using spmd::detail::index_shape;
using spmd::detail::index_starts;

constexpr const char* kFormat = "spmd-sharded-checkpoint";

struct Block {
  int process;  // who writes it
  Index index;
};

// Each distinct block of an array of shape `shape` and who writes it: the process of the first
// device holding it (mesh order); a whole array (no NamedSharding) by process 0.
std::vector<Block> blocks_of(const spmd::detail::ArrayImpl& impl) {
  std::vector<Block> out;
  if (!impl.named) {
    Index whole;
    for (int64_t n : impl.aval.shape) whole.emplace_back(0, n);
    out.push_back({0, whole});
    return out;
  }
  const auto indices = impl.named->indices(impl.aval.shape);
  const auto& devs = impl.named->mesh().devices();
  std::set<Index> seen;
  for (size_t pos = 0; pos < devs.size(); ++pos)
    if (seen.insert(indices[pos]).second) out.push_back({devs[pos].process_index, indices[pos]});
  return out;
}

DType dtype_from_name(const std::string& name) {
  for (DType t :
       {DType::Bool, DType::Int32, DType::Int64, DType::UInt32, DType::Float16, DType::BFloat16,
        DType::Float32, DType::Float64, DType::Complex64, DType::Complex128})
    if (dtype_name(t) == name) return t;
  fail("load_sharded_checkpoint: unknown dtype '", name, "' in the manifest");
}

}  // namespace

void save_sharded_checkpoint(const std::string& dir, const Checkpoint& c) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("save_sharded_checkpoint: cannot create the directory '", dir, "': ", ec.message());
  // Each save writes its block files under a new generation number and replaces the manifest
  // last, atomically: a save killed at any point leaves the previous manifest and every file it
  // names untouched (the previous generation's files are removed only after the new manifest is
  // in place).
  const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
  int64_t generation = 1;
  {
    std::error_code exists;
    if (fs::exists(manifest_path, exists)) try {
        generation = json::parse(io::read_file(manifest_path, "save_sharded_checkpoint"))
                         .value("generation", int64_t{0}) +
                     1;
      } catch (const json::exception&) {
      }
  }
  json manifest = {{"format", kFormat},
                   {"version", 1},
                   {"generation", generation},
                   {"arrays", json::object()},
                   {"ints", json::object()}};
  int a = 0;
  for (const auto& [name, x] : c.arrays) {
    const spmd::detail::ArrayImpl& impl = spmd::detail::concrete(x, "save_sharded_checkpoint");
    if (!impl.named) spmd::detail::check_fully_addressable(impl, "save_sharded_checkpoint");
    json entry = {{"dtype", dtype_name(impl.aval.dtype)},
                  {"shape", impl.aval.shape},
                  {"layout", impl.named ? impl.named->str() : std::string("whole")},
                  {"blocks", json::array()}};
    int b = 0;
    const std::vector<AddressableShard> shards =
        impl.named ? x.addressable_shards() : std::vector<AddressableShard>{};
    for (const Block& block : blocks_of(impl)) {
      std::string file = "a";  // (appended piece by piece: GCC 12 warns falsely on a + chain)
      file += std::to_string(a);
      file += ".b";
      file += std::to_string(b++);
      file += ".g";
      file += std::to_string(generation);
      file += ".npy";
      if (block.process == process_index()) {
        const std::string path = (fs::path(dir) / file).string();
        if (!impl.named) save_npy(path, x);
        for (const AddressableShard& s : shards)
          if (s.index == block.index) {
            save_npy(path, s.data);
            break;
          }
      }
      entry["blocks"].push_back({{"file", file}, {"index", block.index}});
    }
    manifest["arrays"][name] = std::move(entry);
    ++a;
  }
  for (const auto& [name, v] : c.ints) manifest["ints"][name] = v;
  multihost_utils::sync_global_devices("save_sharded_checkpoint: blocks of " + dir);
  if (process_index() == 0) {
    const std::string text = manifest.dump(1);
    io::write_file_atomically(manifest_path, {text}, "save_sharded_checkpoint");
    // Block files the new manifest does not name (earlier generations', a killed save's).
    std::set<std::string> named;
    for (const auto& item : manifest["arrays"].items())
      for (const auto& block : item.value()["blocks"])
        named.insert(block["file"].get<std::string>());
    std::error_code ignored;
    for (const auto& f : fs::directory_iterator(dir, ignored)) {
      const std::string name = f.path().filename().string();
      if (name.size() > 4 && name[0] == 'a' && name.ends_with(".npy") && !named.count(name))
        fs::remove(f.path(), ignored);
    }
  }
  multihost_utils::sync_global_devices("save_sharded_checkpoint: manifest of " + dir);
}

Checkpoint load_sharded_checkpoint(const std::string& dir,
                                   const std::map<std::string, NamedSharding>& layouts) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  json manifest;
  try {
    manifest = json::parse(io::read_file(path, "load_sharded_checkpoint"));
    if (manifest.at("format") != kFormat || manifest.at("version") != 1)
      fail("load_sharded_checkpoint: '", path, "' is not a version 1 ", kFormat, " manifest");
  } catch (const json::exception& e) {
    fail("load_sharded_checkpoint: cannot read the manifest '", path, "': ", e.what());
  }
  for (const auto& [name, layout] : layouts)
    if (!manifest["arrays"].contains(name))
      fail("load_sharded_checkpoint: a layout is given for '", name, "', which the checkpoint in '",
           dir, "' does not hold");
  Checkpoint c;
  try {
    for (const auto& item : manifest.at("arrays").items()) {
      const std::string name = item.key();  // (named, not bound: the lambda below captures it)
      const json& entry = item.value();
      const Shape shape = entry.at("shape").get<Shape>();
      const DType dtype = dtype_from_name(entry.at("dtype").get<std::string>());
      std::vector<std::pair<Index, std::string>> saved;
      for (const auto& b : entry.at("blocks"))
        saved.emplace_back(b.at("index").get<Index>(), b.at("file").get<std::string>());
      // The block files, memory-mapped: only the byte ranges of the saved blocks that overlap a
      // wanted block are read (restoring onto another mesh or process count reads this
      // process's part, never a whole array per process).
      std::map<std::string, Array> parsed;  // files stored otherwise (Fortran order, big-endian)
      auto assemble = [&](const Index& want) {
        Array out = spmd::detail::make_array(AbstractValue{index_shape(want), dtype, false});
        if (out.nbytes()) std::memset(out.impl()->data(), 0, out.nbytes());
        for (const auto& [index, file] : saved) {
          // (Only a saved block that overlaps the wanted one is read: its overlap [lo, hi).)
          Shape lo, hi;
          if (index.size() != want.size() || !spmd::detail::box_overlap(index, want, lo, hi))
            continue;
          // (Mapped for this block only: the pages read leave this process's memory with it.)
          const io::MappedFile mapping((fs::path(dir) / file).string(), "load_sharded_checkpoint");
          const std::string_view bytes = mapping.bytes();
          const io::NpyLayout layout = io::npy_layout(bytes, (fs::path(dir) / file).string());
          if (layout.shape != index_shape(index) || layout.dtype != dtype)
            fail("load_sharded_checkpoint: block file '", file, "' of '", name, "' holds ",
                 dtype_name(layout.dtype), shape_str(layout.shape), "; the manifest says ",
                 dtype_name(dtype), shape_str(index_shape(index)));
          const char* data = bytes.data() + layout.data_offset;
          if (layout.fortran || layout.swap) {
            auto p = parsed.find(file);
            if (p == parsed.end())
              p = parsed.emplace(file, io::parse_npy(bytes, (fs::path(dir) / file).string())).first;
            data = static_cast<const char*>(p->second.data());
          }
          spmd::detail::copy_box(data, index_starts(index), index_shape(index),
                                 static_cast<char*>(out.impl()->data()), index_starts(want),
                                 index_shape(want), lo, hi, itemsize(dtype));
        }
        return out;
      };
      auto layout = layouts.find(name);
      if (layout == layouts.end()) {
        Index whole;
        for (int64_t n : shape) whole.emplace_back(0, n);
        c.arrays[name] = assemble(whole);
      } else {
        c.arrays[name] = make_array_from_callback(shape, layout->second, assemble);
      }
    }
    for (const auto& [name, v] : manifest.at("ints").items()) c.ints[name] = v.get<int64_t>();
  } catch (const json::exception& e) {
    fail("load_sharded_checkpoint: the manifest '", path, "' is malformed: ", e.what());
  }
  return c;
}

}  // namespace spmd::nn
