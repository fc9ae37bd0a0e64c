// The persistent compilation cache (spmd/compilation_cache.h): a second process's first call
// loads the kernels a first one compiled; entries of another build or CPU, corrupted, truncated
// or unsafe ones are refused and compiled again, with the same result; processes sharing a cold
// directory compile each kernel once. Each run is a new process (tests/compilation_cache_probe.cpp),
// so only the directory carries anything between runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "codegen/object_cache.h"
#include "spmd/compilation_cache.h"
#include "spmd/error.h"

namespace fs = std::filesystem;
using namespace spmd;

namespace {

struct ProbeRun {
  long long compiled = -1, loaded = -1, written = -1, refused = -1;
  std::string sum, output;
};

// What a probe printed (its last line), and all it printed (warnings included).
ProbeRun parse_run(const std::string& output) {
  ProbeRun r;
  r.output = output;
  size_t at = output.rfind("compiled ");
  if (at == std::string::npos) return r;
  std::istringstream is(output.substr(at));
  std::string w;
  is >> w >> r.compiled >> w >> r.loaded >> w >> r.written >> w >> r.refused >> w >> r.sum;
  return r;
}

// Starts a probe with the cache in `dir` ("" for none); read it with finish().
FILE* start_probe(const std::string& dir) {
  std::string cmd = "SPMD_COMPILATION_CACHE_DIR='" + dir + "' " + SPMD_CACHE_PROBE + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) ADD_FAILURE() << "cannot start " << cmd;
  return p;
}
ProbeRun finish(FILE* p) {
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  return parse_run(out);
}
ProbeRun probe(const std::string& dir) { return finish(start_probe(dir)); }

class CompilationCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::enabled()) GTEST_SKIP() << "the code generator is off (SPMD_CODEGEN=0)";
    root_ = fs::path(SPMD_TEST_TMP) /
            ("compilation_cache_" + std::string(::testing::UnitTest::GetInstance()
                                                    ->current_test_info()
                                                    ->name()) +
             "_" + std::to_string(getpid()));
    fs::remove_all(root_);
    dir_ = (root_ / "cache" / "nested").string();
    // Without a cache: what the kernels compute, and how many there are.
    plain_ = probe("");
    ASSERT_GT(plain_.compiled, 0) << plain_.output;
    ASSERT_EQ(plain_.loaded, 0);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".spmdobj") out.push_back(e.path());
    return out;
  }
  static std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static void write(const fs::path& p, const std::string& bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << bytes;
  }

  fs::path root_;
  std::string dir_;
  ProbeRun plain_;
};

TEST_F(CompilationCache, SecondRunLoadsEveryKernelInsteadOfCompiling) {
  ProbeRun cold = probe(dir_);
  EXPECT_EQ(cold.compiled, plain_.compiled) << cold.output;
  EXPECT_EQ(cold.loaded, 0);
  EXPECT_EQ(cold.written, plain_.compiled);
  EXPECT_EQ(cold.sum, plain_.sum);
  EXPECT_EQ(static_cast<long long>(entries().size()), plain_.compiled);
  ProbeRun warm = probe(dir_);
  EXPECT_EQ(warm.compiled, 0) << warm.output;
  EXPECT_EQ(warm.loaded, plain_.compiled);
  EXPECT_EQ(warm.written, 0);
  EXPECT_EQ(warm.refused, 0);
  EXPECT_EQ(warm.sum, plain_.sum);  // the same bits
  // The directory and its parents it made are private; entries are the user's only.
  for (const fs::path& d : {root_ / "cache", fs::path(dir_)}) {
    struct stat st;
    ASSERT_EQ(stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  for (const fs::path& e : entries()) {
    struct stat st;
    ASSERT_EQ(stat(e.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0077, 0u) << e;
  }
}

TEST_F(CompilationCache, CorruptedAndTruncatedEntriesAreRefusedAndCompiledAgain) {
  probe(dir_);
  std::vector<fs::path> files = entries();
  ASSERT_EQ(static_cast<long long>(files.size()), plain_.compiled);
  // One entry with a flipped byte in its code, one cut short, one empty.
  std::string bytes = read(files[0]);
  bytes[bytes.size() / 2] ^= 0x40;
  write(files[0], bytes);
  if (files.size() > 1) write(files[1], read(files[1]).substr(0, read(files[1]).size() - 100));
  if (files.size() > 2) write(files[2], "");
  const long long broken = std::min<long long>(3, plain_.compiled);
  ProbeRun r = probe(dir_);
  EXPECT_EQ(r.refused, broken) << r.output;
  EXPECT_EQ(r.compiled, broken);
  EXPECT_EQ(r.loaded, plain_.compiled - broken);
  EXPECT_EQ(r.sum, plain_.sum);
  EXPECT_NE(r.output.find("checksum does not match"), std::string::npos) << r.output;
  // Rewritten whole: the next run loads everything.
  ProbeRun again = probe(dir_);
  EXPECT_EQ(again.compiled, 0) << again.output;
  EXPECT_EQ(again.refused, 0);
}

TEST_F(CompilationCache, EntriesOfAnotherBuildOrCpuAreNeverLoaded) {
  probe(dir_);
  // Each entry rewritten as another build would have made it: a valid entry (its checksum
  // holds) whose environment differs, at the name this build looks for.
  for (const fs::path& e : entries()) {
    std::string bytes = read(e);
    // The entry's fields, as codegen/object_cache.h lays them out.
    size_t at = 8 + 4;
    auto field = [&] {
      uint32_t n = 0;
      for (int i = 0; i < 4; ++i)
        n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
      std::string f = bytes.substr(at + 4, n);
      at += 4 + n;
      return f;
    };
    std::string env = field();
    std::string key = field();
    std::string why;
    auto object = codegen::parse_entry(bytes, env, key, why);
    ASSERT_TRUE(object.has_value()) << why;
    ASSERT_EQ(env.rfind("spmd ", 0), 0u) << env;
    write(e, codegen::encode_entry("spmd 99." + env.substr(5), key, *object));
  }
  ProbeRun r = probe(dir_);
  EXPECT_EQ(r.loaded, 0) << r.output;
  EXPECT_EQ(r.compiled, plain_.compiled);
  EXPECT_EQ(r.refused, plain_.compiled);
  EXPECT_NE(r.output.find("another library build or CPU"), std::string::npos) << r.output;
  EXPECT_EQ(r.sum, plain_.sum);
}

TEST_F(CompilationCache, UnsafeEntriesAndDirectoriesAreRefusedWithAWarning) {
  probe(dir_);
  std::vector<fs::path> files = entries();
  ASSERT_GE(files.size(), 1u);
  // Writable by others: refused.
  ASSERT_EQ(chmod(files[0].c_str(), 0666), 0);
  long long unsafe = 1;
  // Owned by another user (only root can make one).
  if (geteuid() == 0 && files.size() > 1) {
    ASSERT_EQ(chown(files[1].c_str(), 4242, static_cast<gid_t>(-1)), 0);
    ++unsafe;
  }
  // A symbolic link in place of an entry is not followed.
  if (files.size() > 2) {
    fs::path target = root_ / "elsewhere.spmdobj";
    fs::rename(files[2], target);
    fs::create_symlink(target, files[2]);
    ++unsafe;
  }
  ProbeRun r = probe(dir_);
  EXPECT_EQ(r.refused, unsafe) << r.output;
  EXPECT_EQ(r.compiled, unsafe);
  EXPECT_EQ(r.sum, plain_.sum);
  EXPECT_NE(r.output.find("writable by group or others"), std::string::npos) << r.output;
  if (unsafe > 1 && geteuid() == 0) {
    EXPECT_NE(r.output.find("owned by user 4242"), std::string::npos) << r.output;
  }
  // A directory writable by others: the cache is off, with a warning.
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  ProbeRun off = probe(dir_);
  EXPECT_EQ(off.loaded, 0) << off.output;
  EXPECT_EQ(off.written, 0);
  EXPECT_EQ(off.compiled, plain_.compiled);
  EXPECT_NE(off.output.find("the cache is off"), std::string::npos) << off.output;
  try {
    set_compilation_cache_dir(dir_);
    FAIL() << "a directory writable by others was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writable by group or others"), std::string::npos)
        << e.what();
  }
  // A file where the directory should be.
  write(root_ / "plain_file", "x");
  EXPECT_THROW(set_compilation_cache_dir((root_ / "plain_file").string()), Error);
  EXPECT_EQ(compilation_cache_dir(), "");
}

TEST_F(CompilationCache, EightProcessesSharingAColdCacheCompileEachKernelOnce) {
  std::vector<FILE*> running;
  for (int i = 0; i < 8; ++i) running.push_back(start_probe(dir_));
  long long compiled = 0, loaded = 0;
  for (FILE* p : running) {
    ProbeRun r = finish(p);
    EXPECT_EQ(r.sum, plain_.sum) << r.output;
    EXPECT_EQ(r.refused, 0) << r.output;
    EXPECT_EQ(r.compiled + r.loaded, plain_.compiled) << r.output;
    compiled += r.compiled;
    loaded += r.loaded;
  }
  EXPECT_EQ(compiled, plain_.compiled);  // once in all, not 8 times
  EXPECT_EQ(loaded, 7 * plain_.compiled);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_TRUE(e.path().extension() == ".spmdobj" || e.path().filename() == "lock") << e.path();
}

TEST(CompilationCacheEntry, ParsesOnlyWhatItWroteForTheSameEnvironmentAndKey) {
  const std::string object(300, 'o');
  std::string bytes = codegen::encode_entry("env A", "kernel 1", object);
  std::string why;
  auto got = codegen::parse_entry(bytes, "env A", "kernel 1", why);
  ASSERT_TRUE(got.has_value()) << why;
  EXPECT_EQ(*got, object);
  EXPECT_FALSE(codegen::parse_entry(bytes, "env B", "kernel 1", why).has_value());
  EXPECT_NE(why.find("another library build or CPU (env A)"), std::string::npos) << why;
  EXPECT_FALSE(codegen::parse_entry(bytes, "env A", "kernel 2", why).has_value());
  EXPECT_EQ(why, "it holds another kernel");
  // Every truncation and every single flipped bit is refused (the checksum or the lengths).
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(codegen::parse_entry(bytes.substr(0, n), "env A", "kernel 1", why).has_value())
        << n;
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::string b = bytes;
    b[i] ^= 1;
    EXPECT_FALSE(codegen::parse_entry(b, "env A", "kernel 1", why).has_value()) << i;
  }
  // A valid checksum over fields that do not fit: refused by the lengths.
  std::string liar = bytes.substr(0, bytes.size() - 32);
  liar[8 + 4] = static_cast<char>(0xff);  // the environment's length
  const std::string hex = codegen::sha256_hex(liar);
  for (size_t i = 0; i < 64; i += 2)
    liar.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  EXPECT_FALSE(codegen::parse_entry(liar, "env A", "kernel 1", why).has_value());
  EXPECT_EQ(why, "its fields do not fit its size");
}

TEST(CompilationCacheEntry, DigestIsSha256) {
  // FIPS 180-2's test vector.
  EXPECT_EQ(codegen::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
