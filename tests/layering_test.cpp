// The layer order of src/ (README, "The design": layers), checked on the include graph: every
// `#include "..."` line of every file under src/ and include/ is read from the source tree
// (SPMD_SOURCE_DIR, set by tests/CMakeLists.txt). A file may include its own layer and the
// layers below it; base/ only the standard library and the public vocabulary headers; public
// headers only public headers. The includes that still point up are listed below with their
// reasons, each until it is removed: the list may only shrink.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
// other (primitives/ and transforms/: the rules of cond, scan, while, pmap, remat and custom
// derivatives transform their sub-programs, and the transformations call the rules).
// clang-format off
const std::map<std::string, int> kLayerRank = {
    {"base", 0}, {"core", 1}, {"ir", 2}, {"runtime", 3},
    {"primitives", 4}, {"transforms", 4},
    {"ops", 5}, {"codegen", 6}, {"compile", 7}, {"backend", 8},
    {"distributed", 9}, {"io", 9}, {"nn", 9}, {"random", 9},  // libraries over the rest
};
// clang-format on

// The public headers base/ may include: the vocabulary every layer shares (DType, Shape,
// spmd::Error), headers that include nothing themselves.
const std::set<std::string> kBaseMayInclude = {"spmd/dtype.h", "spmd/error.h", "spmd/shape.h"};

// Includes that point up today, file (relative to src/) and included header, each with why it
// is there and what removes it. The issue's rule has no exception here: core/, ir/, runtime/
// and transforms/ include nothing from backend/ (checked below).
struct KnownUpward {
  const char* file;
  const char* include;
  const char* why;
};
const KnownUpward kKnownUpward[] = {
    {"compile/executable.h", "backend/kernel.h",
     "the kernel interface (Kernel, ExecContext, Buf) is declared with the CPU registry; it "
     "belongs below compile/"},
    {"primitives/control_flow.cpp", "compile/executable.h",
     "cond/while/scan cache their sub-programs' Executables in the primitive"},
    {"primitives/control_flow.cpp", "compile/simplify.h", "as above"},
    {"primitives/pmap_call.cpp", "compile/executable.h",
     "PmapCall lowers and compiles its per-replica program; the lowering moves to compile/"},
    {"primitives/pmap_call.cpp", "compile/simplify.h", "as above"},
    {"transforms/jit.cpp", "compile/executable.h", "jit's front end compiles and runs"},
    {"transforms/jit.cpp", "compile/simplify.h", "as above"},
    {"transforms/pmap.cpp", "compile/executable.h", "pmap's front end reads the compiled call"},
    {"transforms/control_flow.cpp", "ops/common.h",
     "the control-flow front ends promote operands with the ops layer's helpers"},
};

// "base, core, ..., primitives+transforms, ...": the layers bottom up, peers joined by '+'.
std::string layer_order() {
  std::map<int, std::string> by_rank;
  for (const auto& [dir, rank] : kLayerRank)
    by_rank[rank] += (by_rank[rank].empty() ? "" : "+") + dir;
  std::string order;
  for (const auto& [rank, dirs] : by_rank) order += (order.empty() ? "" : ", ") + dirs;
  return order;
}

std::string top_dir(const std::string& path) { return path.substr(0, path.find('/')); }

bool known_upward(const std::string& file, const std::string& include) {
  return std::any_of(std::begin(kKnownUpward), std::end(kKnownUpward),
                     [&](const KnownUpward& k) { return file == k.file && include == k.include; });
}

// Why `file` (relative to src/, or "spmd/..." for a public header) may not include `include`
// (as written between the quotes), or nothing when it may.
std::optional<std::string> layering_violation(const std::string& file, const std::string& include) {
  const std::string from = top_dir(file), to = top_dir(include);
  const std::string edge = file + ": #include \"" + include + "\"";
  if (include.find('/') == std::string::npos)
    return edge + ": name the header by its layer directory";
  if (from == "spmd") {
    if (to == "spmd") return std::nullopt;
    return edge + ": a public header includes only public headers";
  }
  auto from_rank = kLayerRank.find(from);
  if (from_rank == kLayerRank.end())
    return edge + ": src/" + from + "/ is in no layer; give it a place in the order";
  if (to == "spmd") {
    if (from != "base" || kBaseMayInclude.count(include)) return std::nullopt;
    return edge + ": base/ includes only the standard library and spmd/dtype.h, error.h, shape.h";
  }
  auto to_rank = kLayerRank.find(to);
  if (to_rank == kLayerRank.end())
    return edge + ": src/" + to + "/ is in no layer; give it a place in the order";
  if (to_rank->second <= from_rank->second || known_upward(file, include)) return std::nullopt;
  return edge + ": " + from + "/ is below " + to + "/ (layers, bottom up: " + layer_order() + ")";
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

const fs::path kSource = SPMD_SOURCE_DIR;

// The rule itself, on edges made up for the purpose: each kind of violation is reported, naming
// the file and the include.
TEST(LayeringRule, ReportsAnIncludeOfAHigherLayer) {
  auto v = layering_violation("core/array.cpp", "backend/cpu/dispatch.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("core/array.cpp: #include \"backend/cpu/dispatch.h\""), std::string::npos)
      << *v;
  EXPECT_NE(v->find("core/ is below backend/"), std::string::npos) << *v;
  EXPECT_TRUE(layering_violation("runtime/mesh.h", "backend/kernel.h").has_value());
  EXPECT_TRUE(layering_violation("base/parallel.cpp", "runtime/env.h").has_value());
  EXPECT_TRUE(layering_violation("ir/primitive.cpp", "primitives/primitives.h").has_value());
}

TEST(LayeringRule, AllowsTheSameLayerAndTheLayersBelow) {
  EXPECT_EQ(layering_violation("backend/eager.cpp", "core/array_impl.h"), std::nullopt);
  EXPECT_EQ(layering_violation("runtime/mesh.h", "runtime/communicator.h"), std::nullopt);
  EXPECT_EQ(layering_violation("primitives/remat.cpp", "transforms/autodiff.h"), std::nullopt);
  EXPECT_EQ(layering_violation("transforms/callback.cpp", "primitives/callback.h"), std::nullopt);
  EXPECT_EQ(layering_violation("core/array.cpp", "spmd/ops.h"), std::nullopt);
}

TEST(LayeringRule, ExceptionsAreThoseListedOnly) {
  EXPECT_EQ(layering_violation("compile/executable.h", "backend/kernel.h"), std::nullopt);
  EXPECT_TRUE(layering_violation("compile/loop_fusion.h", "backend/kernel.h").has_value());
  EXPECT_TRUE(layering_violation("transforms/jit.cpp", "backend/kernel.h").has_value());
}

TEST(LayeringRule, BaseIncludesOnlyVocabularyHeaders) {
  EXPECT_EQ(layering_violation("base/env.cpp", "spmd/error.h"), std::nullopt);
  auto v = layering_violation("base/env.cpp", "spmd/array.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("base/ includes only"), std::string::npos) << *v;
}

TEST(LayeringRule, PublicHeadersIncludeOnlyPublicHeaders) {
  EXPECT_EQ(layering_violation("spmd/ops.h", "spmd/array.h"), std::nullopt);
  EXPECT_TRUE(layering_violation("spmd/array.h", "core/array_impl.h").has_value());
}

TEST(LayeringRule, NewDirectoriesNeedAPlace) {
  auto v = layering_violation("newlayer/x.cpp", "core/array_impl.h");
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("src/newlayer/ is in no layer"), std::string::npos) << *v;
  EXPECT_TRUE(layering_violation("core/array.cpp", "newlayer/x.h").has_value());
  EXPECT_TRUE(layering_violation("core/array.cpp", "array_impl.h").has_value());
}

// The issue's rule (core/, ir/, runtime/ and transforms/ include nothing from backend/) has no
// listed exception.
TEST(LayeringRule, NoExceptionLetsTheLowerLayersIncludeTheBackend) {
  for (const KnownUpward& k : kKnownUpward) {
    const std::string from = top_dir(k.file), to = top_dir(k.include);
    EXPECT_FALSE(to == "backend" &&
                 (from == "core" || from == "ir" || from == "runtime" || from == "transforms"))
        << k.file << " -> " << k.include;
  }
}

TEST(Layering, SourceTreeFollowsTheLayerOrder) {
  auto src = includes_under(kSource / "src");
  auto pub = includes_under(kSource / "include");
  ASSERT_GT(src.size(), 100u) << "read too few includes from " << kSource;
  ASSERT_GT(pub.size(), 10u) << "read too few includes from " << kSource;
  std::vector<std::string> violations;
  for (const auto& [file, include] : src)
    if (auto v = layering_violation(file, include)) violations.push_back(*v);
  for (const auto& [file, include] : pub)
    if (auto v = layering_violation(file, include)) violations.push_back(*v);
  std::string all;
  for (const std::string& v : violations) all += "\n  " + v;
  EXPECT_TRUE(violations.empty()) << violations.size() << " includes break the layer order:" << all;
}

TEST(Layering, EveryListedExceptionStillExists) {
  auto src = includes_under(kSource / "src");
  for (const KnownUpward& k : kKnownUpward) {
    bool found = std::any_of(src.begin(), src.end(), [&](const auto& e) {
      return e.first == k.file && e.second == k.include;
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

}  // namespace
