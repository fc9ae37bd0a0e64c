// libFuzzer target for the safetensors parser (load_safetensors): the input is a whole
// .safetensors file. An input that parses is parsed again with every tensor a 2x2 mesh of CPU
// devices can split laid out on it (make_array_from_callback copying each block's byte ranges),
// and each block must equal its slice of the whole tensor, element by element: a difference, or
// an error from the second parse, is a finding (trap).
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "io/parsers.h"
#include "spmd/mesh.h"
#include "spmd/topology.h"

namespace {

using spmd::Array;
using spmd::Index;

// The bytes of block `index` of a row-major array, element by element.
std::string block_bytes(const Array& whole, const Index& index) {
  const spmd::Shape& s = whole.shape();
  const size_t w = static_cast<size_t>(spmd::itemsize(whole.dtype()));
  const char* p = static_cast<const char*>(whole.data());
  std::string out;
  std::vector<int64_t> at(s.size(), 0);
  for (int64_t flat = 0; flat < whole.size(); ++flat) {
    int64_t rest = flat;
    bool in = true;
    for (size_t d = s.size(); d-- > 0;) {
      at[d] = rest % s[d];
      rest /= s[d];
      in = in && index[d].first <= at[d] && at[d] < index[d].second;
    }
    if (in) out.append(p + static_cast<size_t>(flat) * w, w);
  }
  return out;
}

void check_sharded(std::string_view bytes, const spmd::io::SafetensorsContents& whole) {
  static const spmd::Mesh mesh = spmd::make_mesh({2, 2}, {"a", "b"});
  std::map<std::string, spmd::NamedSharding> layouts;
  for (const auto& [name, a] : whole.tensors) {
    if (a.size() > 4096) continue;  // the element-by-element reference is slow
    std::vector<spmd::PartitionSpec::Entry> spec;
    if (a.ndim() >= 1)
      spec.emplace_back(a.shape()[0] % 2 == 0 ? "a" : spmd::PartitionSpec::Entry(spmd::none));
    if (a.ndim() >= 2)
      spec.emplace_back(a.shape()[1] % 2 == 0 ? "b" : spmd::PartitionSpec::Entry(spmd::none));
    layouts.emplace(name, spmd::NamedSharding(mesh, spmd::PartitionSpec(spec)));
  }
  if (layouts.empty()) return;
  spmd::io::SafetensorsContents sharded;
  try {
    sharded = spmd::io::parse_safetensors(bytes, "fuzz.safetensors", layouts);
  } catch (...) {
    __builtin_trap();  // the file parsed whole; laid out, it must too
  }
  for (const auto& [name, layout] : layouts) {
    const Array& want = whole.tensors.at(name);
    const Array& got = sharded.tensors.at(name);
    if (got.shape() != want.shape() || got.dtype() != want.dtype()) __builtin_trap();
    for (const spmd::AddressableShard& s : got.addressable_shards()) {
      std::string block = block_bytes(want, s.index);
      if (s.data.nbytes() != block.size() ||
          (!block.empty() && std::memcmp(s.data.data(), block.data(), block.size()) != 0))
        __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spmd::set_cpu_device_count(4);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = spmd::fuzz::bytes(data, size);
  return spmd::fuzz::run([&] {
    spmd::io::SafetensorsContents c = spmd::io::parse_safetensors(bytes, "fuzz.safetensors");
    for (const auto& [name, a] : c.tensors) spmd::fuzz::use(a);
    check_sharded(bytes, c);
  });
}
