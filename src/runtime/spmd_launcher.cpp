// The SPMD launcher (runtime/spmd_launcher.h). Collectives across processes end a run with an
// end-of-program marker, or each header says how many collectives follow it.
#include "runtime/spmd_launcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "base/async_worker.h"
#include "base/copy.h"
#include "base/env.h"
#include "base/parallel.h"
#include "base/timeline.h"
#include "core/array_impl.h"
#include "core/device_source.h"
#include "runtime/client.h"
#include "runtime/hierarchical_communicator.h"
#include "runtime/mesh.h"
#include "runtime/process.h"
#include "runtime/transport.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {

using backend::Buf;
using backend::ExecContext;

// Below this many bytes of inputs and outputs, a pmap without collectives runs inline.
constexpr size_t kInlineCallBytes = 1 << 18;

// A replica's place in the mesh, as the kernels see it: by group id.
class MeshAxes final : public backend::ReplicaAxes {
 public:
  explicit MeshAxes(runtime::MeshReplica replica) : replica_(std::move(replica)) {}
  int index(int group) const override { return replica_.index(group); }
  int size(int group) const override { return replica_.size(group); }
  runtime::Communicator& communicator(int group) const override {
    return replica_.communicator(group);
  }
  void begin_call(int64_t collectives) const { replica_.begin_call(collectives); }

 private:
  runtime::MeshReplica replica_;
};

// Where each device's block of one operand or result lies, from the dimension each mesh axis
// indexes (SpmdExecutable::in_dims / out_dims). When the mapped dimensions all come before
// the others, a block is contiguous: at the sum over the axes of coordinate times that
// dimension's stride. Otherwise an operand's block is gathered by a strided copy on the
// device's own thread, and a result's blocks are written contiguously into a staging buffer laid
// out (mapped dimensions in mesh-axis order, then the block) and moved into place at the end.
struct BlockLayout {
  std::vector<int64_t> axis_stride;  // per mesh axis, in elements (0: not mapped)
  bool contiguous = true;
  std::vector<int64_t> block_strides;  // non-contiguous operands: the block's strides
  Shape block;
  std::vector<int> staged_perm;  // non-contiguous results: staging layout -> result layout
  Shape staged_shape;
};

BlockLayout block_layout(const Shape& shape, const std::vector<int>& dims, bool result) {
  BlockLayout b;
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  std::vector<bool> mapped(static_cast<size_t>(rank), false);
  int n_mapped = 0;
  for (int d : dims)
    if (d != not_mapped) {
      mapped[static_cast<size_t>(d)] = true;
      ++n_mapped;
    }
  for (int d = 0; d < n_mapped; ++d) b.contiguous = b.contiguous && mapped[static_cast<size_t>(d)];
  // (Dimensions of extent 1 are left out of the gather: they move nothing.)
  for (int d = 0; d < rank; ++d)
    if (!mapped[static_cast<size_t>(d)] && shape[d] != 1) {
      b.block.push_back(shape[d]);
      b.block_strides.push_back(strides[d]);
    }
  if (b.contiguous || !result) {
    for (int d : dims) b.axis_stride.push_back(d == not_mapped ? 0 : strides[d]);
    return b;
  }
  // A result's staging buffer: (mapped dimensions in axis order, block).
  for (int d : dims)
    if (d != not_mapped) {
      b.staged_perm.push_back(d);
      b.staged_shape.push_back(shape[d]);
    }
  for (int d = 0; d < rank; ++d)
    if (!mapped[static_cast<size_t>(d)]) {
      b.staged_perm.push_back(d);
      b.staged_shape.push_back(shape[d]);
    }
  std::vector<int64_t> staged_strides(b.staged_shape.size(), 1);
  for (int k = static_cast<int>(staged_strides.size()) - 2; k >= 0; --k)
    staged_strides[k] = staged_strides[k + 1] * b.staged_shape[k + 1];
  int k = 0;
  for (int d : dims) b.axis_stride.push_back(d == not_mapped ? 0 : staged_strides[k++]);
  return b;
}

// What a call builds for its replicas: the run state their rendezvous share, the mesh (with
// its rendezvous) and each replica's axes (with the communicators of its groups). Kept between
// the calls of one executable (SpmdExecutable::idle_launches): a collective then finds its
// communicator by its group id, and nothing is rebuilt per call. Over processes too:
// each process makes the calls of a pmap one after the other (concurrent calls of one
// cross-process pmap could not pair their messages in any case), so each takes the launch the
// previous call left and the communicators' sequence numbers go on in step (rebuilding them
// cost ~0.9 us of a 4 us cross-process psum, bench_latency).
struct Launch {
  std::shared_ptr<runtime::RunState> run;
  std::unique_ptr<runtime::Mesh> mesh;
  std::vector<std::unique_ptr<MeshAxes>> axes;  // per replica this process runs
};
constexpr size_t kIdleLaunches = 4;  // calls of one pmap at once from several threads

// Every replica at once, as the rows of one batched program on all the cores
// (SpmdExecutable::batched); its operands and results are the call's, in place. On a timeline
// every replica's device shows the span, named as batched: the work is theirs, done at once.
void run_batched(const compile::SpmdExecutable& compiled, std::span<const Buf> in,
                 std::span<const Buf> out, const std::vector<int>& devices) {
  const int device = devices.front();
  {
    runtime::Timeline::OnTrack on_track(device);
    runtime::Timeline::Span span("compute", devices);
    std::vector<void*> ins, outs;
    for (const Buf& b : in) ins.push_back(b.data);
    for (const Array& c : compiled.batched_constants) ins.push_back(c.impl()->data());
    for (const Buf& b : out) outs.push_back(b.data);
    ExecContext ctx;
    ctx.device = device;
    ctx.threads = cpu::hardware_threads();
    compiled.batched->run_into(ins, outs, ctx);
  }
  runtime::Timeline::flush();
}

}  // namespace

void launch_spmd(const compile::SpmdExecutable& compiled, const SpmdPlacement& where,
                 std::span<const Buf> in, std::span<const Buf> out, ExecContext& caller) {
  const compile::Executable& exe = *compiled.executable;
  int64_t outer = where.size;  // this process's rows (every process's, on a mesh over processes)
  int64_t inner = 1;
  for (size_t k = 1; k < compiled.mesh_sizes.size(); ++k) inner *= compiled.mesh_sizes[k];
  const int total = static_cast<int>(outer * inner);
  // The replicas this process runs (their mesh positions) and their devices.
  std::vector<int> local, devices;
  std::vector<int> process_of;  // a mesh over processes: the process of each replica
  static const std::vector<int> kNone;
  const std::vector<int>& mesh_devices = where.mesh_devices ? *where.mesh_devices : kNone;
  const bool spans_mesh = !mesh_devices.empty();
  if (spans_mesh) {
    const std::vector<Device> all = runtime::global_devices();
    for (int r = 0; r < total; ++r) {
      const Device& d = all.at(static_cast<size_t>(mesh_devices[r]));
      process_of.push_back(d.process_index);
      if (d.process_index != runtime::this_process()) continue;
      local.push_back(r);
      devices.push_back(d.local_id);
    }
  } else {
    devices = where.devices ? *where.devices : kNone;
    if (devices.empty()) {
      core::check_device_count(total);
      for (int r = 0; r < total; ++r) devices.push_back(r);
    } else if (static_cast<int>(devices.size()) != total) {
      fail("pmap: the mapped size times nested sizes is ", total, ", but ", devices.size(),
           " devices were given");
    }
    for (int r = 0; r < total; ++r) local.push_back(r);
  }
  const int replicas = static_cast<int>(local.size());
  // Operands and results held as blocks (Buf::blocks): each replica reads and writes its own.
  bool blocked = false;
  for (const Buf& b : in) blocked = blocked || b.blocks;
  for (const Buf& b : out) blocked = blocked || b.blocks;
  if (compiled.batched && !blocked) {
    (void)runtime::collective_timeout();  // (a bad setting is an error, as on threads)
    run_batched(compiled, in, out, devices);
    return;
  }

  // Replica r's coordinates on the mesh (this process's rows first, row-major).
  const size_t levels = compiled.mesh_sizes.size();
  auto coords = [&](int r) {
    std::vector<int64_t> c(levels);
    int64_t rest = r;
    for (size_t l = levels; l-- > 1;) {
      c[l] = rest % compiled.mesh_sizes[l];
      rest /= compiled.mesh_sizes[l];
    }
    c[0] = rest;
    return c;
  };
  auto offset_of = [&](const BlockLayout& b, const std::vector<int64_t>& c) {
    int64_t e = 0;
    for (size_t l = 0; l < levels; ++l) e += c[l] * b.axis_stride[l];
    return e;
  };
  std::vector<BlockLayout> in_layout, out_layout;
  for (size_t i = 0; i < in.size(); ++i)
    in_layout.push_back(block_layout(in[i].aval->shape, compiled.in_dims[i], false));
  const auto& out_types = exe.output_types();
  std::vector<std::shared_ptr<runtime::Buffer>> staged(out.size());
  size_t scratch_bytes = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    out_layout.push_back(block_layout(out[j].aval->shape, compiled.out_dims[j], true));
    scratch_bytes += (out_types[j].nbytes() + 63) / 64 * 64;
    if (!out_layout[j].contiguous && !out[j].blocks)
      staged[j] = runtime::allocate(out[j].aval->nbytes());
  }
  // Result j's block is written by the first of this process's replicas that computes it (its
  // coordinate is 0 on every axis j is not mapped on, when the process runs the whole mesh); the
  // others compute the same block and write it to scratch.
  std::vector<std::vector<bool>> writer(out.size(), std::vector<bool>(local.size()));
  for (size_t j = 0; j < out.size(); ++j) {
    std::set<std::vector<int64_t>> seen;
    for (size_t k = 0; k < local.size(); ++k) {
      std::vector<int64_t> c = coords(local[k]);
      for (size_t l = 0; l < levels; ++l)
        if (compiled.out_dims[j][l] == not_mapped) c[l] = 0;
      writer[j][k] = seen.insert(c).second;
    }
  }
  // (The blocks of other processes' devices stay zero.)
  if (replicas < total)
    for (size_t j = 0; j < out.size(); ++j)
      if (!out[j].blocks)
        std::memset(staged[j] ? staged[j]->data : out[j].data, 0, out[j].aval->nbytes());
  std::vector<std::shared_ptr<runtime::Buffer>> scratch(static_cast<size_t>(replicas));

  // Across processes, a 1-D pmap's replicas here are the global rows [base, base + outer).
  const int64_t base = where.global_size != where.size ? runtime::first_global_device_id() : 0;
  std::shared_ptr<Launch> launch;
  {
    std::lock_guard lock(compiled.launches_mu);
    if (!compiled.idle_launches.empty()) {
      launch = std::static_pointer_cast<Launch>(compiled.idle_launches.back());
      compiled.idle_launches.pop_back();
    }
  }
  if (!launch) {
    launch = std::make_shared<Launch>();
    launch->run = std::make_shared<runtime::RunState>();
    launch->mesh =
        std::make_unique<runtime::Mesh>(compiled.mesh_sizes, compiled.groups, launch->run);
    if (spans_mesh) launch->mesh->place_on_processes(process_of, runtime::this_process());
    if (where.global_size != where.size)
      launch->mesh->span_processes(runtime::process_device_counts(), runtime::this_process());
    for (int k = 0; k < replicas; ++k)
      launch->axes.push_back(
          std::make_unique<MeshAxes>(launch->mesh->replica(static_cast<int>(base + local[k]))));
  }
  runtime::RunState* run = launch->run.get();
  runtime::Mesh& mesh = *launch->mesh;
  run->timeout = runtime::collective_timeout();
  // The leader of this process's devices bounds its own waits for the other processes (a
  // header and a data exchange per collective) and names whom it waited for; the devices
  // waiting on it must not give up first with a less precise error.
  if (mesh.spans_processes()) run->timeout = 2 * run->timeout + std::chrono::seconds(5);
  int threads = std::max(1, cpu::hardware_threads() / std::max(1, replicas));
  if (mesh.spans_processes())
    for (auto& axes : launch->axes) axes->begin_call(compiled.static_collectives);
  auto replica = [&](int k) {
    const int r = local[k];
    runtime::Timeline::set_track(devices[k]);
    runtime::Timeline::Span span("compute");
    const std::vector<int64_t> c = coords(r);
    std::vector<void*> ins(in.size()), outs(out.size());
    std::vector<std::shared_ptr<runtime::Buffer>> gathered;
    for (size_t i = 0; i < in.size(); ++i) {
      const BlockLayout& b = in_layout[i];
      const int item = static_cast<int>(itemsize(in[i].aval->dtype));
      if (in[i].blocks) {
        ins[i] = in[i].blocks[r];
        continue;
      }
      if (b.contiguous) {
        ins[i] = static_cast<char*>(in[i].data) + offset_of(b, c) * item;
        continue;
      }
      gathered.push_back(runtime::allocate(
          std::max<size_t>(static_cast<size_t>(shape_size(b.block) * item), 1), devices[k]));
      cpu::strided_copy(in[i].data, offset_of(b, c), b.block_strides, b.block,
                        gathered.back()->data, item, 1);
      ins[i] = gathered.back()->data;
    }
    size_t offset = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      const BlockLayout& b = out_layout[j];
      const int64_t item = static_cast<int64_t>(itemsize(out_types[j].dtype));
      if (writer[j][k] && out[j].blocks) {
        outs[j] = out[j].blocks[r];
      } else if (writer[j][k]) {
        char* base_ptr = static_cast<char*>(staged[j] ? staged[j]->data : out[j].data);
        outs[j] = base_ptr + offset_of(b, c) * item;
      } else {
        if (!scratch[k])
          scratch[k] = runtime::allocate(std::max<size_t>(scratch_bytes, 64), devices[k]);
        outs[j] = static_cast<char*>(scratch[k]->data) + offset;
      }
      offset += (out_types[j].nbytes() + 63) / 64 * 64;
    }
    ExecContext ctx;
    ctx.device = devices[k];
    ctx.axes = launch->axes[k].get();
    ctx.threads = threads;
    ctx.async_collectives = mesh.spans_processes() && runtime::async_collectives(threads);
    // The only replica here writes each result whole, in place: it may hand its caller storage
    // for one (ExecContext::adopt_output).
    struct Passing {
      const ExecContext::OutputAdopter* outer;
      const std::vector<void*>* outs;
      std::span<const Buf> out;
    } passing{caller.adopt_output, &outs, out};
    const ExecContext::OutputAdopter adopter{
        [](const void* self, size_t j, std::shared_ptr<runtime::Buffer> storage) {
          const Passing& s = *static_cast<const Passing*>(self);
          return j < s.out.size() && (*s.outs)[j] == s.out[j].data &&
                 s.outer->fn(s.outer->self, j, std::move(storage));
        },
        &passing};
    if (caller.adopt_output && replicas == 1 && total == 1) ctx.adopt_output = &adopter;
    exe.run_into(ins, outs, ctx);
    run->finish(k);  // a replica still waiting for this one now never will be joined
  };
  // Replicas that never communicate and touch little data run one after the other on this
  // thread: waking 8 device threads costs ~50 µs here (an idle virtual CPU's wake-up), far more
  // than the work. Everything else runs concurrently, one replica per device thread — loops
  // too, whose work is their trip count times their body, not their data.
  size_t bytes = 0;
  for (const Buf& b : in) bytes += b.aval->nbytes();
  for (const Buf& b : out) bytes += b.aval->nbytes();
  if (!compiled.communicates && !compiled.loops && !mesh.spans_processes() &&
      bytes <= kInlineCallBytes && !runtime::on_worker_thread()) {
    for (int r = 0; r < replicas; ++r) replica(r);
  } else {
    // Errors name replicas by their (global) device ids.
    std::vector<int> ids;
    for (int d : devices) ids.push_back(runtime::first_global_device_id() + d);
    run->follow(std::move(ids));
    if (!devices.empty())  // (a process may hold no device of a mesh over processes)
      runtime::Client::get().run_on_devices(devices, replica, [run] {
        run->abort();  // (the launch is dropped: the exception leaves before it is kept)
        if (auto* t = runtime::transport()) t->announce_failure("a replica of a pmap failed");
      });
    // A process whose replicas left the program while another's still wait in a collective
    // tells it so, instead of leaving it to wait out the timeout. (Where the program makes a
    // fixed number of collectives, each header told the others how many followed it.)
    if (mesh.spans_processes() && compiled.communicates && compiled.static_collectives < 0)
      runtime::end_program_across_processes(*runtime::transport(), compiled.mesh_names[0]);
  }

  // Results whose blocks were staged: move them into place.
  for (size_t j = 0; j < out.size(); ++j) {
    if (!staged[j]) continue;
    const BlockLayout& b = out_layout[j];
    std::vector<int> inverse(b.staged_perm.size());
    for (size_t k = 0; k < b.staged_perm.size(); ++k)
      inverse[static_cast<size_t>(b.staged_perm[k])] = static_cast<int>(k);
    cpu::transpose_copy(staged[j]->data, b.staged_shape, inverse, out[j].data,
                        static_cast<int>(itemsize(out_types[j].dtype)), cpu::hardware_threads());
  }
  runtime::Timeline::flush();
  {
    std::lock_guard lock(compiled.launches_mu);
    if (compiled.idle_launches.size() < kIdleLaunches)
      compiled.idle_launches.push_back(std::move(launch));
  }
}

}  // namespace spmd::runtime
