// The SPMD runtime: the CPU kernel of xla_pmap runs the compiled per-replica program on every
// device of the mesh concurrently, each on its slice of the mapped inputs, with results written
// straight into their slices of the outputs. Replicas that stop making the same collective
// calls (one leaves a loop early) fail the call with a collective mismatch (runtime/run_state.h),
// across processes too (an end-of-program marker), instead of hanging.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/register.h"
#include "backend/kernel.h"
#include "base/allocator.h"
#include "base/copy.h"
#include "base/parallel.h"
#include "compile/executable.h"
#include "primitives/pmap_call.h"
#include "runtime/client.h"
#include "runtime/hierarchical_communicator.h"
#include "runtime/mesh.h"
#include "runtime/process.h"
#include "runtime/timeline.h"
#include "runtime/transport.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

// Below this many bytes of inputs and outputs, a pmap without collectives runs inline.
constexpr size_t kInlineBytes = 1 << 18;

// A replica's place in the runtime's mesh, as the kernels see it: the runtime, below the
// backend, does not implement the backend's interface itself.
class MeshAxes final : public backend::ReplicaAxes {
 public:
  explicit MeshAxes(runtime::MeshReplica replica) : replica_(std::move(replica)) {}
  int index(const std::vector<std::string>& names) const override { return replica_.index(names); }
  int size(const std::vector<std::string>& names) const override { return replica_.size(names); }
  runtime::Communicator& communicator(const std::vector<std::string>& names) const override {
    return replica_.communicator(names);
  }

 private:
  runtime::MeshReplica replica_;
};

// Moves axis `axis` of a buffer to the front (a copy), so replica r's slice is contiguous.
std::shared_ptr<runtime::Buffer> to_front(const Buf& b, int axis) {
  auto out = runtime::allocate(b.aval->nbytes());
  std::vector<int> perm{axis};
  for (int k = 0; k < b.aval->ndim(); ++k)
    if (k != axis) perm.push_back(k);
  transpose_copy(b.data, b.aval->shape, perm, out->data, itemsize(b.aval->dtype),
                 hardware_threads());
  return out;
}

void pmap_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext&) {
  const auto& call = backend::as<prim::PmapCall>(p);
  const auto& compiled = call.compiled();
  const compile::Executable& exe = *compiled.executable;
  int64_t outer = call.size;  // this process's rows
  int64_t inner = 1;
  for (size_t k = 1; k < compiled.mesh_sizes.size(); ++k) inner *= compiled.mesh_sizes[k];
  int replicas = static_cast<int>(outer * inner);
  std::vector<int> devices = call.devices;
  if (devices.empty()) {
    runtime::check_device_count(replicas);
    for (int r = 0; r < replicas; ++r) devices.push_back(r);
  } else if (static_cast<int>(devices.size()) != replicas) {
    fail("pmap: the mapped size times nested sizes is ", replicas, ", but ", devices.size(),
         " devices were given");
  }

  // Inputs: replica row r reads rows r of the mapped inputs.
  std::vector<std::shared_ptr<runtime::Buffer>> keep;
  std::vector<const char*> in_base(in.size());
  std::vector<size_t> in_stride(in.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) {
    int a = call.in_axes[i];
    in_base[i] = static_cast<const char*>(in[i].data);
    if (a == not_mapped) continue;
    if (a != 0) {
      keep.push_back(to_front(in[i], a));
      in_base[i] = static_cast<const char*>(keep.back()->data);
    }
    in_stride[i] = in[i].aval->nbytes() / static_cast<size_t>(outer);
  }
  // Outputs: replica (r, 0) writes row r (or, for out_axes None, replica 0 writes the value);
  // the other columns of a row compute the same row and write to scratch.
  const auto& out_types = exe.output_types();
  std::vector<char*> out_base(out.size());
  std::vector<size_t> out_stride(out.size(), 0);
  std::vector<std::shared_ptr<runtime::Buffer>> staged(out.size());
  size_t scratch_bytes = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    size_t bytes = out_types[j].nbytes();
    scratch_bytes += (bytes + 63) / 64 * 64;
    out_base[j] = static_cast<char*>(out[j].data);
    if (call.out_axes[j] == not_mapped) continue;
    out_stride[j] = bytes;
    if (call.out_axes[j] != 0) {
      staged[j] = runtime::allocate(bytes * static_cast<size_t>(outer));
      out_base[j] = static_cast<char*>(staged[j]->data);
    }
  }
  std::vector<std::shared_ptr<runtime::Buffer>> scratch(replicas);

  auto run = std::make_shared<runtime::RunState>();
  run->timeout = runtime::collective_timeout();
  runtime::Mesh mesh(compiled.mesh_names, compiled.mesh_sizes, run);
  // Across processes, this process's replicas are the global rows [base, base + outer).
  int64_t base = 0;
  if (call.global_size != call.size) {
    std::vector<int> counts = runtime::process_device_counts();
    mesh.span_processes(counts, runtime::this_process());
    base = runtime::first_global_device_id();
    // The leader of this process's devices bounds its own waits for the other processes (a
    // header and a data exchange per collective) and names whom it waited for; the devices
    // waiting on it must not give up first with a less precise error.
    run->timeout = 2 * run->timeout + std::chrono::seconds(5);
  }
  int threads = std::max(1, hardware_threads() / replicas);
  auto replica = [&](int r) {
    runtime::Timeline::set_track(devices[r]);
    runtime::Timeline::Span span("compute");
    int64_t row = r / inner;
    bool writer = r % inner == 0;
    std::vector<void*> ins(in.size()), outs(out.size());
    for (size_t i = 0; i < in.size(); ++i)
      ins[i] = const_cast<char*>(in_base[i] + in_stride[i] * row);
    size_t offset = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      bool mapped = call.out_axes[j] != not_mapped;
      if (writer && (mapped || row == 0)) {
        outs[j] = out_base[j] + out_stride[j] * row;
      } else {
        if (!scratch[r])
          scratch[r] = runtime::allocate(std::max<size_t>(scratch_bytes, 64), devices[r]);
        outs[j] = static_cast<char*>(scratch[r]->data) + offset;
      }
      offset += (out_types[j].nbytes() + 63) / 64 * 64;
    }
    const MeshAxes axes(mesh.replica(static_cast<int>(base + r)));
    ExecContext ctx;
    ctx.device = devices[r];
    ctx.axes = &axes;
    ctx.threads = threads;
    exe.run_into(ins, outs, ctx);
    run->finish(r);  // a replica still waiting for this one now never will be joined
  };
  // Replicas that never communicate and touch little data run one after the other on this
  // thread: waking 8 device threads costs ~50 µs here (an idle virtual CPU's wake-up), far more
  // than the work. Everything else runs concurrently, one replica per device thread — loops
  // too, whose work is their trip count times their body, not their data.
  size_t bytes = 0;
  for (const Buf& b : in) bytes += b.aval->nbytes();
  for (const Buf& b : out) bytes += b.aval->nbytes();
  if (!compiled.communicates && !compiled.loops && base == 0 && call.global_size == call.size &&
      bytes <= kInlineBytes && !runtime::on_worker_thread()) {
    for (int r = 0; r < replicas; ++r) replica(r);
  } else {
    // Errors name replicas by their (global) device ids.
    std::vector<int> ids;
    for (int d : devices) ids.push_back(runtime::first_global_device_id() + d);
    run->follow(std::move(ids));
    runtime::Client::get().run_on_devices(devices, replica, [run] {
      run->abort();
      if (auto* t = runtime::transport()) t->announce_failure("a replica of a pmap failed");
    });
    // A process whose replicas left the program while another's still wait in a collective
    // tells it so, instead of leaving it to wait out the timeout.
    if (mesh.spans_processes() && compiled.communicates)
      runtime::end_program_across_processes(*runtime::transport(), compiled.mesh_names[0]);
  }

  // Outputs whose mapped axis is not the first: move it into place.
  for (size_t j = 0; j < out.size(); ++j) {
    if (!staged[j]) continue;
    Shape s = out_types[j].shape;
    s.insert(s.begin(), outer);
    std::vector<int> perm;
    int a = call.out_axes[j];
    for (int k = 1; k <= static_cast<int>(out_types[j].shape.size()); ++k) {
      if (static_cast<int>(perm.size()) == a) perm.push_back(0);
      perm.push_back(k);
    }
    if (static_cast<int>(perm.size()) == a) perm.push_back(0);
    transpose_copy(staged[j]->data, s, perm, out[j].data, itemsize(out_types[j].dtype),
                   hardware_threads());
  }
  runtime::Timeline::flush();
}

}  // namespace

void register_pmap_kernel() { backend::register_kernel(typeid(prim::PmapCall), pmap_kernel); }

}  // namespace spmd::cpu
