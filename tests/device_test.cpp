// Emulated CPU devices: how many there are (set_cpu_device_count, SPMD_CPU_DEVICES, XLA_FLAGS),
// the bounds and validation of those settings and of the other numeric SPMD_* variables
// (SPMD_CPU_THREADS, SPMD_COLLECTIVE_TIMEOUT), how devices print, and where device_put places
// arrays.
//
// The device count is fixed at the first use of a device, once per process. Under ctest every
// test below runs in its own process (gtest_discover_tests), so each one sets up its own count:
// run them with `ctest -R device_test`, not by running the binary once for all of them.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/parallel.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace {

using spmd::test_util::error_of;
using spmd::test_util::expect_contains;

using spmd::Array;
using spmd::Device;

// A clean environment: no count from the shell that started the test.
void clear_env() {
  unsetenv("SPMD_CPU_DEVICES");
  unsetenv("XLA_FLAGS");
}

TEST(DeviceCount, DefaultIsOneDevice) {
  clear_env();
  EXPECT_EQ(spmd::device_count(), 1);
  EXPECT_EQ(spmd::local_device_count(), 1);
  ASSERT_EQ(spmd::devices().size(), 1u);
  EXPECT_EQ(spmd::devices()[0].str(), "CpuDevice(id=0)");
}

TEST(DeviceCount, EnvironmentVariableSetsCount) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "4", 1);
  EXPECT_EQ(spmd::device_count(), 4);
  EXPECT_EQ(spmd::local_device_count(), 4);
  auto devs = spmd::devices();
  ASSERT_EQ(devs.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(devs[i].id, i);
    EXPECT_EQ(devs[i].local_id, i);
    EXPECT_EQ(devs[i].process_index, 0);
    EXPECT_EQ(devs[i].platform, "cpu");
  }
}

TEST(DeviceCount, XlaFlagsAmongOtherFlags) {
  clear_env();
  setenv("XLA_FLAGS",
         "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=3 "
         "--xla_dump_to=/tmp/nowhere",
         1);
  EXPECT_EQ(spmd::device_count(), 3);
}

TEST(DeviceCount, XlaFlagsAsLastFlag) {
  clear_env();
  setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=5", 1);
  EXPECT_EQ(spmd::device_count(), 5);
}

TEST(DeviceCount, XlaFlagsWithoutDeviceCountGiveOne) {
  clear_env();
  setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false", 1);
  EXPECT_EQ(spmd::device_count(), 1);
}

TEST(DeviceCount, SpmdVariableTakesPrecedenceOverXlaFlags) {
  clear_env();
  setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=3", 1);
  setenv("SPMD_CPU_DEVICES", "2", 1);
  EXPECT_EQ(spmd::device_count(), 2);
}

TEST(DeviceCount, SetCountTakesPrecedenceOverEnvironment) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "2", 1);
  spmd::set_cpu_device_count(6);
  EXPECT_EQ(spmd::device_count(), 6);
}

TEST(DeviceCount, SetCountBeforeFirstUse) {
  clear_env();
  spmd::set_cpu_device_count(8);
  auto devs = spmd::devices();
  ASSERT_EQ(devs.size(), 8u);
  EXPECT_EQ(spmd::local_devices().size(), 8u);
  EXPECT_EQ(devs[3].str(), "CpuDevice(id=3)");
  std::ostringstream os;
  os << devs[7];
  EXPECT_EQ(os.str(), "CpuDevice(id=7)");
}

TEST(DeviceCount, SetCountTwiceBeforeUseKeepsTheLast) {
  clear_env();
  spmd::set_cpu_device_count(3);
  spmd::set_cpu_device_count(2);
  EXPECT_EQ(spmd::device_count(), 2);
}

TEST(DeviceCount, ChangingCountAfterFirstUseThrowsNamingBothCounts) {
  clear_env();
  spmd::set_cpu_device_count(2);
  ASSERT_EQ(spmd::device_count(), 2);
  std::string msg = error_of([] { spmd::set_cpu_device_count(4); });
  expect_contains(msg, "set_cpu_device_count(4)");
  expect_contains(msg, "2 device");
  expect_contains(msg, "before the first use");
  EXPECT_EQ(spmd::device_count(), 2);  // unchanged
}

TEST(DeviceCount, SameCountAfterFirstUseIsAccepted) {
  clear_env();
  EXPECT_EQ(spmd::device_count(), 1);
  EXPECT_NO_THROW(spmd::set_cpu_device_count(1));
}

TEST(DeviceCount, NonPositiveSetCountIsAnError) {
  clear_env();
  std::string msg = error_of([] { spmd::set_cpu_device_count(0); });
  expect_contains(msg, "positive");
  expect_contains(msg, "got 0");
}

TEST(DeviceCount, NonNumericEnvironmentValueIsAnError) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "abc", 1);
  std::string msg = error_of([] { spmd::device_count(); });
  expect_contains(msg, "SPMD_CPU_DEVICES");
  expect_contains(msg, "'abc'");
  expect_contains(msg, "positive");
}

TEST(DeviceCount, ZeroEnvironmentValueIsAnError) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "0", 1);
  std::string msg = error_of([] { spmd::device_count(); });
  expect_contains(msg, "SPMD_CPU_DEVICES");
  expect_contains(msg, "'0'");
}

TEST(DeviceCount, TrailingGarbageInEnvironmentValueIsAnError) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "4x", 1);
  expect_contains(error_of([] { spmd::device_count(); }), "'4x'");
}

TEST(DeviceCount, BadXlaFlagsCountIsAnError) {
  clear_env();
  setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=-2 --xla_other=1", 1);
  std::string msg = error_of([] { spmd::device_count(); });
  expect_contains(msg, "xla_force_host_platform_device_count");
  expect_contains(msg, "'-2'");
}

TEST(DeviceCount, SingleProcess) {
  clear_env();
  spmd::set_cpu_device_count(2);
  EXPECT_EQ(spmd::process_index(), 0);
  EXPECT_EQ(spmd::process_count(), 1);
  auto all = spmd::devices(), local = spmd::local_devices();
  ASSERT_EQ(all.size(), local.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], local[i]);
}

TEST(DevicePut, NewArraysLiveOnDeviceZero) {
  clear_env();
  spmd::set_cpu_device_count(4);
  Array x({1.0, 2.0});
  ASSERT_EQ(x.devices().size(), 1u);
  EXPECT_EQ(x.devices()[0], spmd::devices()[0]);
  EXPECT_FALSE(x.is_sharded());
}

TEST(DevicePut, PlacesOnTheGivenDeviceWithSameValues) {
  clear_env();
  spmd::set_cpu_device_count(4);
  Array x({1.0, 2.0, 3.0});
  Device d2 = spmd::devices()[2];
  Array y = spmd::device_put(x, d2);
  ASSERT_EQ(y.devices().size(), 1u);
  EXPECT_EQ(y.devices()[0], d2);
  EXPECT_EQ(y.devices()[0].str(), "CpuDevice(id=2)");
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.dtype(), x.dtype());
  EXPECT_EQ(x.devices()[0], spmd::devices()[0]);  // the source stays where it was
}

TEST(DevicePut, ComputationFollowsTheData) {
  clear_env();
  spmd::set_cpu_device_count(4);
  Device d3 = spmd::devices()[3];
  Array y = spmd::device_put(Array({1.0, 2.0}), d3);
  Array z = y * 2.0;
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  ASSERT_EQ(z.devices().size(), 1u);
  EXPECT_EQ(z.devices()[0], d3);
}

TEST(DevicePut, UnknownDeviceIsAnError) {
  clear_env();
  spmd::set_cpu_device_count(4);
  Device missing{"cpu", 7, 0, 7};
  std::string msg = error_of([&] { spmd::device_put(Array({1.0}), missing); });
  expect_contains(msg, "4 devices");
  expect_contains(msg, "CpuDevice(id=7)");
}

// ---- bounds and validation of the settings -----------------------------------------------------
// 'text', as the errors quote a setting (built by appending: GCC 12 warns on "'" + s + "'").
std::string quoted(const char* text) {
  std::string q = "'";
  q += text;
  q += "'";
  return q;
}

TEST(DeviceCount, SetCountAboveTheLimitIsAnError) {
  clear_env();
  for (int n : {100000, spmd::max_cpu_devices + 1}) {
    std::string msg = error_of([n] { spmd::set_cpu_device_count(n); });
    expect_contains(msg, "got " + std::to_string(n));
    expect_contains(msg, std::to_string(spmd::max_cpu_devices));
  }
  EXPECT_EQ(spmd::max_cpu_devices, 4096);
  EXPECT_EQ(spmd::device_count(), 1);  // nothing was set
}

TEST(DeviceCount, EnvironmentCountAboveTheLimitIsAnError) {
  clear_env();
  for (const char* text : {"100000", "4097", "99999999999999999999", "", " 4", "2.5"}) {
    setenv("SPMD_CPU_DEVICES", text, 1);
    std::string msg = error_of([] { spmd::device_count(); });
    expect_contains(msg, "SPMD_CPU_DEVICES");
    expect_contains(msg, quoted(text));
    expect_contains(msg, "4096");
  }
  unsetenv("SPMD_CPU_DEVICES");
  setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=100000", 1);
  std::string msg = error_of([] { spmd::device_count(); });
  expect_contains(msg, "xla_force_host_platform_device_count");
  expect_contains(msg, "'100000'");
}

TEST(DeviceCount, ChangingCountAfterAnArrayExistsThrows) {
  clear_env();
  Array x({1.0, 2.0});  // the first use: no device query, no worker thread yet
  std::string msg = error_of([] { spmd::set_cpu_device_count(4); });
  expect_contains(msg, "set_cpu_device_count(4)");
  expect_contains(msg, "1 device");
  expect_contains(msg, "before the first use");
  EXPECT_NO_THROW(spmd::set_cpu_device_count(1));  // the count in force is accepted
  EXPECT_EQ(spmd::device_count(), 1);
}

TEST(DeviceCount, ChangingCountAfterAJitThrows) {
  clear_env();
  setenv("SPMD_CPU_DEVICES", "2", 1);
  auto f = spmd::jit([](const Array& a) { return a * 2.0; });
  EXPECT_EQ(f(Array({1.0})).item<float>(), 2.0f);
  std::string msg = error_of([] { spmd::set_cpu_device_count(3); });
  expect_contains(msg, "set_cpu_device_count(3)");
  expect_contains(msg, "2 device");
  EXPECT_EQ(spmd::device_count(), 2);
}

bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Caps the address space so that the system refuses the device threads' stacks, asks for 4000
// devices, and prints the error it gets.
[[noreturn]] void start_with_refused_threads() {
  clear_env();
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  rlim_t limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (512u << 20);
  rlimit rl{limit, limit};
  setrlimit(RLIMIT_AS, &rl);
  spmd::set_cpu_device_count(4000);
  std::string msg = error_of([] { spmd::device_count(); });
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::exit(0);
}

// In a fresh process: gtest's threadsafe death-test style re-runs this test alone.
TEST(DeviceCountDeathTest, RefusedThreadsAreAnErrorNotAnAbort) {
  if (under_sanitizer()) GTEST_SKIP() << "an address-space limit breaks sanitizer runtimes";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(start_with_refused_threads(), ::testing::ExitedWithCode(0),
              "cannot start 4000 emulated CPU devices");
}

// Reads SPMD_CPU_THREADS (once per process, hence a fresh one) and prints the error it gets.
[[noreturn]] void read_thread_count(const char* text) {
  setenv("SPMD_CPU_THREADS", text, 1);
  std::string msg = error_of([] { spmd::cpu::hardware_threads(); });
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::exit(0);
}

TEST(EnvironmentDeathTest, BadThreadCountIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* text : {"abc", "0", "-1", "", "4097", "8x"})
    EXPECT_EXIT(read_thread_count(text), ::testing::ExitedWithCode(0),
                "SPMD_CPU_THREADS.*" + quoted(text));
}

// A pmap reads SPMD_COLLECTIVE_TIMEOUT for every run.
void run_psum() {
  spmd::pmap([](const Array& a) { return spmd::psum(a, "i"); }, "i")(spmd::ones({1, 2}));
}

TEST(Environment, BadCollectiveTimeoutIsAnError) {
  clear_env();
  for (const char* text : {"abc", "0", "-1", "1e999", "", "nan", "inf", "5s", "-0"}) {
    setenv("SPMD_COLLECTIVE_TIMEOUT", text, 1);
    std::string msg = error_of(run_psum);
    expect_contains(msg, "SPMD_COLLECTIVE_TIMEOUT");
    expect_contains(msg, quoted(text));
  }
  for (const char* text : {"2.5", "30", "0.5"}) {
    setenv("SPMD_COLLECTIVE_TIMEOUT", text, 1);
    EXPECT_NO_THROW(run_psum()) << text;
  }
  unsetenv("SPMD_COLLECTIVE_TIMEOUT");
  EXPECT_NO_THROW(run_psum());
}

}  // namespace
