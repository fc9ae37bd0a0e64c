// SPMD_TRACE: a pmap run writes Chrome trace events, one track per device. Each test runs in its
// own process under ctest, so the environment variable is set before the first use.
#include <gtest/gtest.h>
#include <spmd/spmd.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

using namespace spmd;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST(Timeline, PmapWritesOneTrackPerDeviceWithComputeAndCollectiveWaits) {
  std::string path = std::string(SPMD_TEST_TMP) + "/trace_" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  setenv("SPMD_TRACE", path.c_str(), 1);
  setenv("SPMD_PMAP_THREADS", "1", 1);  // one thread per replica (not batched)
  set_cpu_device_count(4);
  auto f = pmap([](const Array& x) { return psum(x * 2.0, "i"); }, "i");
  Array y = f(ones({4, 1000}));
  unsetenv("SPMD_PMAP_THREADS");
  EXPECT_EQ(y.to_vector<float>()[0], 8.0f);
  std::string json = read_file(path);
  ASSERT_FALSE(json.empty()) << "no trace written to " << path;
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"displayTimeUnit\""), std::string::npos);
  // Per device: one compute span, one collective span (the psum) and, inside it, the waits for
  // the other devices to arrive and to finish their shares; a named track for each.
  EXPECT_EQ(count(json, "\"name\":\"compute\""), 4);
  EXPECT_EQ(count(json, "\"name\":\"collective\""), 4);
  EXPECT_EQ(count(json, "\"name\":\"collective wait\""), 8);
  for (int d = 0; d < 4; ++d)
    EXPECT_NE(json.find("\"name\":\"CpuDevice(id=" + std::to_string(d) + ")\""), std::string::npos);
  std::remove(path.c_str());
}

// The replicas run as one batched program on all the cores: every device's track shows that
// compute span, marked as batched, not one device working alone.
TEST(Timeline, BatchedReplicasWriteTheComputeSpanOnEveryDevicesTrack) {
  std::string path = std::string(SPMD_TEST_TMP) + "/trace_b" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  setenv("SPMD_TRACE", path.c_str(), 1);
  set_cpu_device_count(4);
  auto f = pmap([](const Array& x) { return psum(x * 2.0, "i"); }, "i");
  Array y = f(ones({4, 1000}));
  EXPECT_EQ(y.to_vector<float>()[0], 8.0f);
  std::string json = read_file(path);
  ASSERT_FALSE(json.empty()) << "no trace written to " << path;
  // The psum is a sum over the batch inside the one program: no collective, no waits.
  EXPECT_EQ(count(json, "\"name\":\"compute\""), 4);
  EXPECT_EQ(count(json, "\"args\":{\"batched\":true}"), 4);
  EXPECT_EQ(count(json, "\"name\":\"collective\""), 0);
  for (int d = 0; d < 4; ++d) {
    EXPECT_NE(json.find("\"name\":\"CpuDevice(id=" + std::to_string(d) + ")\""), std::string::npos);
    EXPECT_NE(json.find("\"tid\":" + std::to_string(d) + ",\"ts\""), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(Timeline, NothingIsWrittenWithoutTheVariable) {
  unsetenv("SPMD_TRACE");
  set_cpu_device_count(2);
  auto f = pmap([](const Array& x) { return psum(x, "i"); }, "i");
  EXPECT_EQ(f(ones({2, 3})).to_vector<float>()[0], 2.0f);
}
