// The layer order of the library, checked on the include graph: every `#include "..."` line of
// every file under src/ and include/ is read from the source tree (SPMD_SOURCE_DIR, set by
// tests/CMakeLists.txt). The order is the one of ../shared/design/ARCHITECTURE.md and of the
// README's design paragraph, from the bottom up:
//
//   base         threads, copies, the dtype visitor, the allocator, tracing (timeline), the
//                communication thread; DType, Shape and spmd::Error, the vocabulary under all
//   core         Array, AbstractValue, Mesh and shardings, the device topology, pytrees
//   ir           Program, Primitive, and the interpreters every transformation is built from
//                (batch, forward, autodiff, vjp_reads, axis_env, varying_axes): they know no
//                primitive; each primitive registers its rules with them
//   primitives   the primitives and their rules, with src/ops/: the functions that bind the
//                primitives (jax.numpy, lax, the collectives) are one layer with them, as JAX's
//                lax is with its primitives, because a rule is written in the ops (a jvp of sin
//                calls cos) and an op binds its primitive: neither can sit below the other
//   transforms   jit, vmap, grad, pmap, shard_map, control flow, custom derivatives: the front
//                ends that trace functions into programs and run the interpreters over them
//   compile      simplify, fusion, the SPMD lowering, the Executable, with src/codegen/: code
//                generation is one of compile's passes (a fused group becomes native code)
//   runtime      the launcher, the devices' threads, communicators, processes
//   backend      the kernels, found through compile's kernel registry
//   libraries    random, nn, io, distributed: written over the public API, over all the rest
//
// A file may include its own layer and the layers below it. A public header (include/spmd/*.h)
// belongs to the layer that implements what it declares (kPublicHeaderLayer; every public header
// needs an entry), and an include of it is checked as an include of that layer: core/ including
// spmd/ops.h reaches up into the primitives as surely as including ops/common.h would. Public
// headers include only public headers. The includes that still point up are listed below, each
// with its reason, until it is removed: the list may only shrink.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The layers from the bottom up; directories of equal rank are one layer and may include each
// other.
// clang-format off
const std::map<std::string, int> kLayerRank = {
    {"base", 0},
    {"core", 1},
    {"ir", 2},
    {"primitives", 3}, {"ops", 3},    // the ops bind the primitives (see above)
    {"transforms", 4},
    {"compile", 5}, {"codegen", 5},   // code generation is part of compile
    {"runtime", 6},
    {"backend", 7},
    {"distributed", 8}, {"io", 8}, {"nn", 8}, {"random", 8},  // libraries over the rest
};

// Each public header, by the layer that implements what it declares (where its functions are
// defined under src/). A new public header needs an entry here.
const std::map<std::string, std::string> kPublicHeaderLayer = {
    // Vocabulary: header-only or defined in base/ (base/dtype.cpp, base/shape.cpp).
    {"spmd/dtype.h", "base"}, {"spmd/error.h", "base"}, {"spmd/shape.h", "base"},
    // core/: the Array and its values, meshes and shardings (value types), the Device record and
    // the device queries (core/device.cpp, answered by the runtime it installs), pytrees.
    {"spmd/array.h", "core"}, {"spmd/aval.h", "core"}, {"spmd/mesh.h", "core"},
    {"spmd/topology.h", "core"}, {"spmd/pytree.h", "core"},
    // ir/: programs, primitives, and the typed identity that compares Programs structurally.
    {"spmd/identity.h", "ir"}, {"spmd/primitive.h", "ir"}, {"spmd/program.h", "ir"},
    // ops/: jax.numpy, lax, fft and the collectives bind primitives.
    {"spmd/ops.h", "primitives"}, {"spmd/lax.h", "primitives"}, {"spmd/fft.h", "primitives"},
    {"spmd/collectives.h", "primitives"},
    // transforms/.
    {"spmd/transforms.h", "transforms"}, {"spmd/control_flow.h", "transforms"},
    {"spmd/custom_derivatives.h", "transforms"}, {"spmd/jacobians.h", "transforms"},
    {"spmd/callback.h", "transforms"}, {"spmd/checkpoint.h", "transforms"},
    {"spmd/sharding.h", "transforms"},  // shard_map and its spec trees
    {"spmd/mesh_context.h", "transforms"},  // set_mesh, type_of
    {"spmd/out_sharding.h", "transforms"},  // ops with out_sharding
    // codegen/: the persistent compilation cache of the code generator's objects.
    {"spmd/compilation_cache.h", "codegen"},
    // compile/: exported functions (a Program serialized, read back and run under jit).
    {"spmd/export.h", "compile"},
    // runtime/: what the runtime reports about each device (memory_stats).
    {"spmd/device.h", "runtime"},
    // The libraries, and the header that includes everything.
    {"spmd/random.h", "random"}, {"spmd/nn.h", "nn"}, {"spmd/io.h", "io"},
    {"spmd/data.h", "io"},
    {"spmd/distributed.h", "distributed"}, {"spmd/multihost_utils.h", "distributed"},
    {"spmd/spmd.h", "distributed"},
};
// clang-format on

// Includes that point up today, each with why it is there and what removes it: a file (relative
// to src/) and what it includes, a header or, ending in '/', every header of a directory. At
// most 3; the issue's rule has no exception here: core/, ir/, runtime/ and transforms/ include
// nothing from backend/ (checked below).
struct KnownUpward {
  const char* file;
  const char* include;
  const char* why;
};
const KnownUpward kKnownUpward[] = {
    {"transforms/jit.cpp", "compile/executable.h",
     "jit's front end compiles its traced program and runs the Executable (JAX's jit calls down "
     "into dispatch the same way); it goes when jit's call is a primitive whose eager rule "
     "compile/ registers, as the kernels are found through a registry"},
    {"transforms/jit.cpp", "compile/simplify.h", "as above: the program is simplified first"},
    {"transforms/pmap.cpp", "compile/spmd_lowering.h",
     "pmap's front end reads the SPMD executable's nested replica count (the devices a call "
     "needs) and matches donated inputs to its outputs; it goes with the jit exception above, "
     "when donation is a parameter of the call (JAX's donated_invars) and the launcher checks "
     "the devices"},
};

const fs::path kSource = SPMD_SOURCE_DIR;

std::string top_dir(const std::string& path) { return path.substr(0, path.find('/')); }

bool is_public(const std::string& path) { return top_dir(path) == "spmd"; }

// The layer of a file or an include ("core/array_impl.h", "spmd/ops.h"), or nothing when it has
// none (a directory or public header missing from the tables).
std::optional<std::string> layer_of(const std::string& path) {
  if (is_public(path)) {
    auto it = kPublicHeaderLayer.find(path);
    if (it == kPublicHeaderLayer.end()) return std::nullopt;
    return it->second;
  }
  if (!kLayerRank.count(top_dir(path))) return std::nullopt;
  return top_dir(path);
}

// "base, core, ir, ops+primitives, ...": the layers bottom up, peers joined by '+'.
std::string layer_order() {
  std::map<int, std::string> by_rank;
  for (const auto& [dir, rank] : kLayerRank)
    by_rank[rank] += (by_rank[rank].empty() ? "" : "+") + dir;
  std::string order;
  for (const auto& [rank, dirs] : by_rank) order += (order.empty() ? "" : ", ") + dirs;
  return order;
}

bool known_upward(const std::string& file, const std::string& include) {
  return std::any_of(std::begin(kKnownUpward), std::end(kKnownUpward), [&](const KnownUpward& k) {
    const std::string listed = k.include;
    return file == k.file &&
           (include == listed ||
            (listed.back() == '/' && include.compare(0, listed.size(), listed) == 0));
  });
}

// Why `file` (relative to src/, or "spmd/..." for a public header) may not include `include`
// (as written between the quotes), or nothing when it may. Listed exceptions are not reported.
std::optional<std::string> layering_violation(const std::string& file, const std::string& include) {
  const std::string edge = file + ": #include \"" + include + "\"";
  if (include.find('/') == std::string::npos)
    return edge + ": name the header by its layer directory";
  if (is_public(file) && !is_public(include))
    return edge + ": a public header includes only public headers";
  const std::optional<std::string> from = layer_of(file), to = layer_of(include);
  if (!from) {
    if (is_public(file))
      return edge + ": " + file + " is in no layer; add it to kPublicHeaderLayer";
    return edge + ": src/" + top_dir(file) + "/ is in no layer; give it a place in the order";
  }
  if (!to) {
    if (is_public(include))
      return edge + ": " + include + " is in no layer; add it to kPublicHeaderLayer";
    return edge + ": src/" + top_dir(include) + "/ is in no layer; give it a place in the order";
  }
  if (kLayerRank.at(*to) <= kLayerRank.at(*from) || known_upward(file, include))
    return std::nullopt;
  const auto named = [](const std::string& path, const std::string& layer) {
    return is_public(path) ? path + " (" + layer + ")" : layer + "/";
  };
  return edge + ": " + named(file, *from) + " is below " + named(include, *to) +
         " (layers, bottom up: " + layer_order() + ")";
}

// Every (file, quoted include) of the .h and .cpp files under `dir`, files named relative to it.
std::vector<std::pair<std::string, std::string>> includes_under(const fs::path& dir) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::pair<std::string, std::string>> edges;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    const std::string file = fs::relative(entry.path(), dir).generic_string();
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, kInclude)) edges.emplace_back(file, m[1].str());
  }
  return edges;
}

// Every include of the tree: src/'s files relative to src/, the public headers as "spmd/...".
std::vector<std::pair<std::string, std::string>> all_includes() {
  auto edges = includes_under(kSource / "src");
  auto pub = includes_under(kSource / "include");
  edges.insert(edges.end(), pub.begin(), pub.end());
  return edges;
}

// The includes that point up the order, listed exceptions included.
std::vector<std::string> upward_includes() {
  std::vector<std::string> up;
  for (const auto& [file, include] : all_includes()) {
    auto from = layer_of(file), to = layer_of(include);
    if (from && to && kLayerRank.at(*to) > kLayerRank.at(*from))
      up.push_back(file + " -> " + include + " (" + *from + " -> " + *to + ")");
  }
  return up;
}

// The rule itself, on edges made up for the purpose: each kind of violation is reported, naming
// the file and the include.
TEST(LayeringRule, ReportsAnIncludeOfAHigherLayer) {
  auto v = layering_violation("core/array.cpp", "backend/cpu/dispatch.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("core/array.cpp: #include \"backend/cpu/dispatch.h\""), std::string::npos)
      << *v;
  EXPECT_NE(v->find("core/ is below backend/"), std::string::npos) << *v;
  EXPECT_TRUE(layering_violation("runtime/mesh.h", "backend/cpu/dispatch.h").has_value());
  EXPECT_TRUE(layering_violation("base/parallel.cpp", "core/array_impl.h").has_value());
  EXPECT_TRUE(layering_violation("ir/primitive.cpp", "primitives/primitives.h").has_value());
  EXPECT_TRUE(layering_violation("primitives/remat.cpp", "transforms/donation.h").has_value());
  EXPECT_TRUE(layering_violation("ops/creation.cpp", "runtime/client.h").has_value());
  EXPECT_TRUE(layering_violation("compile/executable.cpp", "runtime/communicator.h").has_value());
  EXPECT_TRUE(layering_violation("codegen/loop_kernel.cpp", "backend/cpu/dispatch.h").has_value());
}

TEST(LayeringRule, AllowsTheSameLayerAndTheLayersBelow) {
  EXPECT_EQ(layering_violation("backend/eager.cpp", "core/array_impl.h"), std::nullopt);
  EXPECT_EQ(layering_violation("runtime/mesh.h", "runtime/communicator.h"), std::nullopt);
  EXPECT_EQ(layering_violation("runtime/spmd_launcher.cpp", "compile/executable.h"), std::nullopt);
  EXPECT_EQ(layering_violation("primitives/remat.cpp", "ir/autodiff.h"), std::nullopt);
  EXPECT_EQ(layering_violation("transforms/callback.cpp", "primitives/callback.h"), std::nullopt);
  EXPECT_EQ(layering_violation("ops/common.h", "primitives/primitives.h"), std::nullopt);
  EXPECT_EQ(layering_violation("primitives/dot.cpp", "ops/common.h"), std::nullopt);
  EXPECT_EQ(layering_violation("compile/loop_fusion.cpp", "codegen/loop_kernel.h"), std::nullopt);
  EXPECT_EQ(layering_violation("nn/layers.cpp", "runtime/client.h"), std::nullopt);
}

TEST(LayeringRule, PublicHeadersCountByTheirLayer) {
  // An include of a public header is an include of the layer that implements it.
  auto v = layering_violation("core/array.cpp", "spmd/ops.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("core/ is below spmd/ops.h (primitives)"), std::string::npos) << *v;
  EXPECT_TRUE(layering_violation("ir/forward.cpp", "spmd/ops.h").has_value());
  EXPECT_TRUE(layering_violation("primitives/remat.h", "spmd/checkpoint.h").has_value());
  EXPECT_TRUE(layering_violation("compile/executable.cpp", "spmd/device.h").has_value());
  EXPECT_EQ(layering_violation("core/array.cpp", "spmd/topology.h"), std::nullopt);
  EXPECT_EQ(layering_violation("base/half.h", "spmd/dtype.h"), std::nullopt);
  EXPECT_EQ(layering_violation("ops/common.h", "spmd/lax.h"), std::nullopt);
  EXPECT_EQ(layering_violation("runtime/client.h", "spmd/device.h"), std::nullopt);
  // So does a public header's own include.
  v = layering_violation("spmd/array.h", "spmd/device.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("spmd/array.h (core) is below spmd/device.h (runtime)"), std::string::npos)
      << *v;
  EXPECT_EQ(layering_violation("spmd/ops.h", "spmd/pytree.h"), std::nullopt);
  EXPECT_EQ(layering_violation("spmd/device.h", "spmd/topology.h"), std::nullopt);
  EXPECT_EQ(layering_violation("spmd/spmd.h", "spmd/device.h"), std::nullopt);
}

TEST(LayeringRule, PublicHeadersIncludeOnlyPublicHeaders) {
  EXPECT_EQ(layering_violation("spmd/ops.h", "spmd/array.h"), std::nullopt);
  auto v = layering_violation("spmd/array.h", "core/array_impl.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("a public header includes only public headers"), std::string::npos) << *v;
}

TEST(LayeringRule, ExceptionsAreThoseListedOnly) {
  for (const KnownUpward& k : kKnownUpward) {
    std::string include = k.include;
    if (include.back() == '/') include += "any.h";
    EXPECT_EQ(layering_violation(k.file, include), std::nullopt) << k.file << " -> " << include;
    // The same include from another file of the layer is reported.
    const std::string other = top_dir(k.file) + "/not_listed.cpp";
    EXPECT_TRUE(layering_violation(other, include).has_value()) << other << " -> " << include;
  }
}

TEST(LayeringRule, NewDirectoriesAndPublicHeadersNeedAPlace) {
  auto v = layering_violation("newlayer/x.cpp", "core/array_impl.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("src/newlayer/ is in no layer"), std::string::npos) << *v;
  EXPECT_TRUE(layering_violation("core/array.cpp", "newlayer/x.h").has_value());
  EXPECT_TRUE(layering_violation("core/array.cpp", "array_impl.h").has_value());
  v = layering_violation("nn/layers.cpp", "spmd/new_header.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("spmd/new_header.h is in no layer; add it to kPublicHeaderLayer"),
            std::string::npos)
      << *v;
  EXPECT_TRUE(layering_violation("spmd/new_header.h", "spmd/array.h").has_value());
}

// The issue's rule (core/, ir/, runtime/ and transforms/ include nothing from backend/) has no
// listed exception, and there are at most 3 exceptions.
TEST(LayeringRule, AtMostThreeExceptionsNoneIntoTheBackend) {
  EXPECT_LE(std::size(kKnownUpward), 3u);
  for (const KnownUpward& k : kKnownUpward) {
    const std::string from = top_dir(k.file), to = top_dir(k.include);
    EXPECT_FALSE(to == "backend" &&
                 (from == "core" || from == "ir" || from == "runtime" || from == "transforms"))
        << k.file << " -> " << k.include;
    EXPECT_GT(std::string(k.why).size(), 20u) << k.file << " -> " << k.include << ": say why";
  }
}

TEST(Layering, SourceTreeFollowsTheLayerOrder) {
  auto src = includes_under(kSource / "src");
  auto pub = includes_under(kSource / "include");
  ASSERT_GT(src.size(), 100u) << "read too few includes from " << kSource;
  ASSERT_GT(pub.size(), 10u) << "read too few includes from " << kSource;
  std::vector<std::string> violations;
  for (const auto& [file, include] : all_includes())
    if (auto v = layering_violation(file, include)) violations.push_back(*v);
  std::string all;
  for (const std::string& v : violations) all += "\n  " + v;
  EXPECT_TRUE(violations.empty()) << violations.size() << " includes break the layer order:" << all;
}

// The includes that point up, counted and printed: the listed exceptions, at most 5 includes.
TEST(Layering, UpwardIncludesAreFewAndListed) {
  const std::vector<std::string> up = upward_includes();
  std::cout << up.size() << " includes point up the layer order (" << layer_order() << ")\n";
  for (const std::string& u : up) std::cout << "  " << u << "\n";
  EXPECT_LE(up.size(), 5u);
}

TEST(Layering, EveryListedExceptionStillExists) {
  const auto edges = all_includes();
  for (const KnownUpward& k : kKnownUpward) {
    const std::string listed = k.include;
    bool found = std::any_of(edges.begin(), edges.end(), [&](const auto& e) {
      return e.first == k.file &&
             (e.second == listed ||
              (listed.back() == '/' && e.second.compare(0, listed.size(), listed) == 0));
    });
    EXPECT_TRUE(found) << k.file << " no longer includes " << k.include
                       << ": remove it from kKnownUpward";
  }
}

TEST(Layering, EverySourceDirectoryHasALayer) {
  for (const auto& entry : fs::directory_iterator(kSource / "src")) {
    if (!entry.is_directory()) continue;
    const std::string dir = entry.path().filename().string();
    EXPECT_TRUE(kLayerRank.count(dir)) << "src/" << dir << "/ is in no layer";
  }
}

TEST(Layering, EveryPublicHeaderHasALayer) {
  std::set<std::string> present;
  for (const auto& entry : fs::directory_iterator(kSource / "include" / "spmd")) {
    if (entry.path().extension() != ".h") continue;
    const std::string header = "spmd/" + entry.path().filename().string();
    present.insert(header);
    EXPECT_TRUE(kPublicHeaderLayer.count(header))
        << "include/" << header << " is in no layer; add it to kPublicHeaderLayer";
  }
  for (const auto& [header, layer] : kPublicHeaderLayer) {
    EXPECT_TRUE(present.count(header)) << header << " is listed but not in include/spmd/";
    EXPECT_TRUE(kLayerRank.count(layer)) << header << ": " << layer << " is no layer";
  }
}

}  // namespace
