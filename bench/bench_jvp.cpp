// bench_jvp: forward mode against the primal it differentiates, on a 20-layer tanh MLP (width
// 512, batch 256, float32): x -> tanh(x W_l + b_l), l = 1..20, the parameters closed over, so
// the tangent is the input's (the Jacobian-vector product along a direction in input space).
// Measured in the same run, under spmd::jit and eagerly, interleaved round by round:
//   - the primal f(x);
//   - spmd::jvp(f, x, t): the primitives' own forward rules (target: <= 2x the primal's time);
//   - the same program's jvp with every equation's tangents from its transposed vjp rule
//     (transforms::JvpRules::Transposed: a reverse pass per equation, what jvp cost before);
//   - jvp with tangents for the parameters too (for information: a third matmul per layer).
// Memory: the growth of the process's peak resident set during one call of a freshly jitted
// function (or one eager call): VmHWM is reset through /proc/self/clear_refs after the
// allocator's cache is emptied, and malloc's mmap threshold is fixed so that freed buffers leave
// the resident set. Also the buffers allocated per warm call (runtime::allocation_count).
#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "bench_util.h"
#include "ir/trace.h"
#include "spmd/spmd.h"
#include "ir/forward.h"

namespace {

using spmd::Array;
using spmd::bench::median;
using spmd::bench::ms_of;

constexpr int kLayers = 20, kWidth = 512, kBatch = 256, kRounds = 7;

Array uniform(const spmd::Shape& s, uint64_t seed, double scale) {
  std::vector<float> v = spmd::bench::random_rows(spmd::shape_size(s), seed);
  v.resize(static_cast<size_t>(spmd::shape_size(s)));
  for (float& x : v) x = static_cast<float>((x - 0.5) * 2 * scale);
  return Array(v, s);
}

struct Mlp {
  std::vector<Array> w, b;
  Array operator()(const Array& x) const { return apply(x, w, b); }
  static Array apply(Array x, const std::vector<Array>& w, const std::vector<Array>& b) {
    for (size_t l = 0; l < w.size(); ++l) x = spmd::tanh(spmd::matmul(x, w[l]) + b[l]);
    return x;
  }
};

// f's jvp with the transposed vjp rule of every equation.
std::pair<Array, Array> transposed_jvp(const Mlp& f, const Array& x, const Array& t) {
  spmd::ir::Traced tr = spmd::ir::trace(
      {x.aval()}, [&](const std::vector<Array>& a) { return std::vector<Array>{f(a[0])}; });
  std::vector<Array> args{x};
  args.insert(args.end(), tr.captured.begin(), tr.captured.end());
  auto r =
      spmd::transforms::jvp_eval(tr.program, args, {t}, spmd::transforms::JvpRules::Transposed);
  return {r.outputs[0], r.tangents[0]};
}

long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

struct Memory {
  double peak_mib = -1;  // growth of the peak RSS during one call; -1 if not measurable
  size_t allocations = 0;
};

Memory memory_of(const std::function<void()>& fn) {
  spmd::runtime::release_cached_memory();
  Memory m;
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5" << std::flush;
  long base = status_kib("VmRSS");
  size_t before = spmd::runtime::allocation_count();
  fn();
  m.allocations = spmd::runtime::allocation_count() - before;
  long hwm = status_kib("VmHWM");
  if (clear && base >= 0 && hwm >= base) m.peak_mib = (hwm - base) / 1024.0;
  return m;
}

double max_abs_diff(const Array& a, const Array& b) {
  return spmd::max(spmd::abs(a - b)).item<double>();
}

}  // namespace

int main() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // large buffers are mmapped and returned when freed
  Mlp f;
  for (int l = 0; l < kLayers; ++l) {
    f.w.push_back(uniform({kWidth, kWidth}, 100 + l, 1.5 / std::sqrt(kWidth)));
    f.b.push_back(uniform({kWidth}, 200 + l, 0.1));
  }
  Array x = uniform({kBatch, kWidth}, 1, 1.0), t = uniform({kBatch, kWidth}, 2, 1.0);
  std::vector<Array> tw, tb;
  for (int l = 0; l < kLayers; ++l) {
    tw.push_back(uniform({kWidth, kWidth}, 300 + l, 0.01));
    tb.push_back(uniform({kWidth}, 400 + l, 0.01));
  }

  struct Mode {
    const char* name;
    std::function<Array()> run;   // returns something that depends on the whole computation
    std::function<void()> fresh;  // one call of a newly jitted function (eager: run)
    std::vector<double> ms;
    Memory mem;
  };
  auto primal_jit = spmd::jit([&](const Array& a) { return f(a); });
  auto jvp_jit = spmd::jit([&](const Array& a, const Array& d) { return spmd::jvp(f, a, d); });
  auto transposed_jit =
      spmd::jit([&](const Array& a, const Array& d) { return transposed_jvp(f, a, d); });
  auto all_of = [&](const Array& a, const Array& d, const std::vector<Array>& dw,
                    const std::vector<Array>& db) {
    return spmd::jvp([](const Array& xa, const std::vector<Array>& w,
                        const std::vector<Array>& b) { return Mlp::apply(xa, w, b); },
                     std::make_tuple(a, f.w, f.b), std::make_tuple(d, dw, db));
  };
  auto all_jit = spmd::jit(all_of);
  auto jvp_of = [&](const Array& a, const Array& d) { return spmd::jvp(f, a, d); };
  auto transposed_of = [&](const Array& a, const Array& d) { return transposed_jvp(f, a, d); };
  std::vector<Mode> modes = {
      {"primal, jit",
       [&] { return primal_jit(x); },
       [&] { spmd::jit([&](const Array& a) { return f(a); })(x); },
       {},
       {}},
      {"jvp (forward rules), jit",
       [&] { return jvp_jit(x, t).second; },
       [&] { spmd::jit(jvp_of)(x, t); },
       {},
       {}},
      {"jvp (transposed vjp rules), jit",
       [&] { return transposed_jit(x, t).second; },
       [&] { spmd::jit(transposed_of)(x, t); },
       {},
       {}},
      {"jvp wrt x and parameters, jit",
       [&] { return all_jit(x, t, tw, tb).second; },
       [&] { spmd::jit(all_of)(x, t, tw, tb); },
       {},
       {}},
      {"primal, eager", [&] { return f(x); }, {}, {}, {}},
      {"jvp (forward rules), eager", [&] { return spmd::jvp(f, x, t).second; }, {}, {}, {}},
      {"jvp (transposed vjp rules), eager",
       [&] { return transposed_jvp(f, x, t).second; },
       {},
       {},
       {}},
  };

  // Same tangents from both derivations.
  double diff = max_abs_diff(jvp_jit(x, t).second, transposed_jit(x, t).second);
  for (auto& m : modes) m.run();  // warm up: compile, fill the allocator's cache
  for (int r = 0; r < kRounds; ++r)
    for (auto& m : modes) m.ms.push_back(ms_of([&] { m.run(); }));
  for (auto& m : modes) {
    m.mem = memory_of(m.fresh ? m.fresh : [&] { m.run(); });
    m.mem.allocations = memory_of([&] { m.run(); }).allocations;
  }

  std::printf("jvp of a %d-layer tanh MLP (width %d, batch %d, float32), median of %d rounds\n",
              kLayers, kWidth, kBatch, kRounds);
  std::printf("  max |forward rules - transposed rules| of the tangent: %.3g\n", diff);
  std::printf("  %-38s %10s %10s %14s %12s\n", "call", "ms", "vs primal", "peak RSS MiB",
              "allocations");
  for (size_t i = 0; i < modes.size(); ++i) {
    const Mode& m = modes[i];
    double base = median(modes[i < 4 ? 0 : 4].ms);
    std::printf("  %-38s %10.2f %10.2f %14.1f %12zu\n", m.name, median(m.ms), median(m.ms) / base,
                m.mem.peak_mib, m.mem.allocations);
  }
  double jit_ratio = median(modes[1].ms) / median(modes[0].ms);
  double eager_ratio = median(modes[5].ms) / median(modes[4].ms);
  std::printf("  target: jvp <= 2x the primal's time: jit %.2fx %s, eager %.2fx %s\n", jit_ratio,
              jit_ratio <= 2 ? "ok" : "MISSED", eager_ratio, eager_ratio <= 2 ? "ok" : "MISSED");
  std::printf("  forward rules vs transposed rules: jit %.2fx faster, eager %.2fx faster\n",
              median(modes[2].ms) / median(modes[1].ms), median(modes[6].ms) / median(modes[5].ms));
  return 0;
}
