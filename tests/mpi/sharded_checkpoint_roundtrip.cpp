// A sharded checkpoint saved by several processes and restored by another number of processes
// onto another mesh (ctest: saved by 2 processes on a 2 x 4 mesh whose "model" groups span
// them, restored by 1 process on 8 x 1 and by 4 processes on 4 x 2).
//   sharded_checkpoint_roundtrip save DIR | load DIR
// Exits 0 when every restored value equals the saved one (computed again here).
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>

#include "spmd/distributed.h"
#include "spmd/error.h"
#include "spmd/multihost_utils.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"

using namespace spmd;

namespace {

Array counting(const Shape& shape, double scale) {
  std::vector<double> v(static_cast<size_t>(shape_size(shape)));
  std::iota(v.begin(), v.end(), 1.0);
  return Array(v, shape) * scale;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "save") != 0 && std::strcmp(argv[1], "load") != 0)) {
    std::fprintf(stderr, "usage: %s save|load DIR\n", argv[0]);
    return 2;
  }
  const bool save = std::strcmp(argv[1], "save") == 0;
  const std::string dir = argv[2];
  try {
    distributed::initialize();
    const Array w = counting({8, 16}, 0.5), b = counting({16}, 2.0);
    if (save) {
      // "model" groups across the processes: position (i, j) on device 2j + i.
      std::vector<Device> order;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) order.push_back(devices().at(2 * j + i));
      Mesh mesh({2, 4}, {"data", "model"}, order);
      nn::Checkpoint c;
      c.arrays["w"] = device_put(w, NamedSharding(mesh, P("data", "model")));
      c.arrays["b"] = device_put(b, NamedSharding(mesh, P("model")));
      c.ints["step"] = 7;
      nn::save_sharded_checkpoint(dir, c);
      if (process_index() == 0) std::printf("saved by %d processes\n", process_count());
      return 0;
    }
    const int64_t n = device_count();
    Mesh mesh = make_mesh({n, 8 / n}, {"x", "y"});
    nn::Checkpoint c = nn::load_sharded_checkpoint(
        dir, {{"w", NamedSharding(mesh, P("y", "x"))}, {"b", NamedSharding(mesh, P("x"))}});
    Array gw = multihost_utils::process_allgather(c.arrays.at("w"));
    Array gb = multihost_utils::process_allgather(c.arrays.at("b"));
    const bool ok = gw.to_vector<float>() == w.to_vector<float>() &&
                    gb.to_vector<float>() == b.to_vector<float>() && c.ints.at("step") == 7;
    if (process_index() == 0)
      std::printf("restored by %d processes onto %s: %s\n", process_count(), mesh.str().c_str(),
                  ok ? "equal to the saved arrays" : "DIFFERENT");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
