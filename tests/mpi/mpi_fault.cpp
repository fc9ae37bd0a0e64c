// A multi-process run that goes wrong on purpose, for the fault tests (run_fault.cmake):
//   exit      process 1 calls std::exit(3) after a few pmap(psum) steps while the others go on;
//   stuck     process 1 stops answering (sleeps 40 s) there instead;
//   exit_direct, stuck_direct: the same with psums of 256 KiB per device, which processes of
//             one device each on one host make by reading each other's buffers directly;
//   mismatch  process 0 runs psum while the others run all_gather;
//   shapes    process 0 runs psum of 1024 floats per device, the others of 512;
//   reductions   process 0 runs psum, the others pmax, of the same buffers;
//   minmax       process 0 runs pmax, the others pmin;
//   permutations process 0 runs ppermute shifting by +1, the others by -1;
//   layouts      process 0 runs all_to_all splitting axis 0, the others axis 1 (same shapes);
//   groups       process 0 runs psum with axis_index_groups of adjacent pairs, the others of
//                the even and the odd devices;
//   finished     process 0's loop makes one psum, the others' two: process 0 finishes the
//                program while the others wait in their second psum;
//   diverged     process 0 leaves its loop after one psum and goes on to an all_gather while the
//                others make a second psum;
//   elsewhere    process 0 makes its psum after a multiplication, the others before it: the same
//                psum of the same shape, at another place in the program;
//   while        a pmapped while_loop whose trip count is axis_index + 1, a psum per iteration
//                (one program everywhere; run with one device per process, run_fault.cmake).
// Every process that catches spmd::Error prints "process <p>: error: <message>" and exits 1;
// reaching the end without an error prints "no error" and exits 0 (the checks then fail).
#include <spmd/spmd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace spmd;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  const std::vector<std::string> modes = {
      "exit",    "stuck",  "mismatch", "shapes",   "reductions", "minmax", "permutations",
      "layouts", "groups", "finished", "diverged", "elsewhere",  "while", "exit_direct",
      "stuck_direct"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    std::fprintf(
        stderr,
        "usage: %s exit|stuck|mismatch|shapes|reductions|minmax|permutations|layouts|groups|"
        "finished|diverged|elsewhere|while|exit_direct|stuck_direct\n",
        argv[0]);
    return 2;
  }
  distributed::initialize();
  const int me = process_index();
  const int64_t local = local_device_count();
  try {
    if (process_count() < 2) fail("expected a run of at least 2 processes, got ", process_count());
    const bool direct = mode.size() > 7 && mode.substr(mode.size() - 7) == "_direct";
    if (direct) mode = mode.substr(0, mode.size() - 7);
    Array x = ones({local, direct ? 65536 : 1024}, float32);
    auto step = pmap([](const Array& v) { return psum(v, "i"); }, "i");
    if (mode == "exit" || mode == "stuck") {
      for (int i = 0; i < 50; ++i) {
        if (me == 1 && i == 5 && mode == "stuck") {
          std::printf("process 1: stuck at step %d\n", i);
          std::fflush(stdout);
          std::this_thread::sleep_for(std::chrono::seconds(40));
        }
        if (me == 1 && i == 5) {
          std::printf("process 1: leaving with std::exit(3) at step %d\n", i);
          std::fflush(stdout);
          std::exit(3);
        }
        x = step(x) / static_cast<float>(device_count());
      }
    } else if (mode == "shapes") {
      x = step(me == 0 ? x : ones({local, 512}, float32));
    } else if (mode == "reductions" || mode == "minmax") {
      // Same collective kind, dtype, size and axis: only the reduction differs.
      bool first = me == 0;
      auto reduce = pmap(
          [&](const Array& v) {
            if (mode == "reductions") return first ? psum(v, "i") : pmax(v, "i");
            return first ? pmax(v, "i") : pmin(v, "i");
          },
          "i");
      x = reduce(x);
    } else if (mode == "permutations") {
      const int n = static_cast<int>(device_count());
      const int shift = me == 0 ? 1 : n - 1;
      std::vector<std::pair<int, int>> perm;
      for (int i = 0; i < n; ++i) perm.emplace_back(i, (i + shift) % n);
      x = pmap([&](const Array& v) { return ppermute(v, "i", perm); }, "i")(x);
    } else if (mode == "layouts") {
      const int64_t n = device_count();
      const int split = me == 0 ? 0 : 1;
      Array square = ones({local, n, n}, float32);
      x = pmap([&](const Array& v) { return all_to_all(v, "i", split, split); }, "i")(square);
    } else if (mode == "groups") {
      const int n = static_cast<int>(device_count());
      AxisIndexGroups groups;
      if (me == 0) {
        for (int i = 0; i < n; i += 2) groups.push_back({i, i + 1});
      } else {
        groups.resize(2);
        for (int i = 0; i < n; ++i) groups[i % 2].push_back(i);
      }
      x = pmap([&](const Array& v) { return psum(v, "i", groups); }, "i")(x);
    } else if (mode == "finished" || mode == "diverged") {
      // A loop unrolled at trace time whose trip count differs per process, a psum in each
      // iteration (what a while_loop with a per-device trip count does at run time).
      const int trips = me == 0 ? 1 : 2;
      auto loop = pmap(
          [&](const Array& v) {
            Array y = v;
            for (int k = 0; k < trips; ++k) y = psum(y, "i");
            if (mode == "diverged" && me == 0) y = all_gather(y, "i");
            return y;
          },
          "i");
      x = loop(x);
      // Long enough that a process waiting for this one would time out first without the
      // end-of-program marker.
      std::this_thread::sleep_for(std::chrono::seconds(20));
    } else if (mode == "while") {
      using Carry = std::pair<Array, Array>;
      auto loop = pmap(
          [](const Array& v) {
            Array limit = axis_index("i") + 1;
            return lax::while_loop([&](const Carry& c) { return c.second < limit; },
                                   [](const Carry& c) {
                                     return Carry(c.first + psum(c.first, "i"), c.second + 1);
                                   },
                                   Carry(v, Array(int32_t{0})))
                .first;
          },
          "i");
      x = loop(x);
      std::this_thread::sleep_for(std::chrono::seconds(20));
    } else if (mode == "elsewhere") {
      auto f = pmap(
          [&](const Array& v) { return me == 0 ? psum(v * 2.0f, "i") : psum(v, "i") * 2.0f; }, "i");
      x = f(x);
    } else {
      auto gather = pmap([](const Array& v) { return all_gather(v, "i"); }, "i");
      if (me == 0) {
        x = step(x);
      } else {
        x = gather(x);
      }
    }
  } catch (const Error& e) {
    std::printf("process %d: error: %s\n", me, e.what());
    std::fflush(stdout);
    return 1;
  }
  std::printf("process %d: no error\n", me);
  return 0;
}
