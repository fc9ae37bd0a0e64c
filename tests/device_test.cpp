// Emulated CPU devices: how many there are (set_cpu_device_count, SPMD_CPU_DEVICES, XLA_FLAGS),
// how they print, and where device_put places arrays.
//
// The device count is fixed at the first use of a device, once per process. Under ctest every
// test below runs in its own process (gtest_discover_tests), so each one sets up its own count:
// run them with `ctest -R device_test`, not by running the binary once for all of them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

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

}  // namespace
