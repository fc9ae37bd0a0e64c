// The CPU backend's eager executor: one primitive at once on concrete arrays (JAX's op-by-op
// mode). The layers below call it through ir/eager.h's hook, which this file fills in while the
// library is loaded, so they need not include the backend.
#include "ir/eager.h"

#include <vector>

#include "base/checked_size.h"
#include "base/parallel.h"
#include "compile/kernel.h"
#include "core/array_impl.h"
#include "spmd/array.h"
#include "spmd/error.h"
#include "spmd/primitive.h"

namespace spmd::backend {
namespace {

std::vector<Array> execute_eager_on_cpu(const Primitive& p, const std::vector<Array>& inputs,
                                        const std::vector<Array>& into) {
  std::vector<AbstractValue> in_types;
  in_types.reserve(inputs.size());
  for (const Array& a : inputs) {
    const detail::ArrayImpl& impl = detail::concrete(a, p.name().c_str());
    // An array laid out on a mesh is one buffer of the whole array on this host: an op reads it
    // whole (its result on one device) when this process holds all of it, and otherwise would
    // need the other processes' blocks, which only shard_map or pmap may use (pmap, explicit
    // SPMD, reads the blocks it maps whatever their layout).
    if (impl.named && !impl.named->is_fully_addressable() && p.name() != "xla_pmap")
      detail::check_not_partitioned(impl, p.name());
    in_types.push_back(impl.aval);
  }
  std::vector<AbstractValue> out_types = p.abstract_eval(in_types);
  // Views (reshape) make no buffer, so make_array's check would not see their shape.
  for (const AbstractValue& t : out_types)
    detail::checked_byte_count(t.shape, t.dtype, p.name().c_str());

  const detail::ArrayImpl* first = inputs.empty() ? nullptr : inputs[0].impl().get();
  int device = first ? first->placement.front() : 0;
  std::vector<Array> outs;
  // A view (reshape) of a contiguous array shares its buffer: no copy, placement kept.
  if (p.is_view()) {
    outs.push_back(
        detail::wrap_buffer(out_types[0], first->buffer, first->offset, first->placement, false));
    return outs;
  }
  // Elementwise results of a sharded array stay sharded the same way.
  bool keep_sharding = first && first->sharded && out_types.size() == 1 &&
                       out_types[0].ndim() > 0 && first->aval.ndim() > 0 &&
                       out_types[0].shape[0] == first->aval.shape[0];
  std::vector<Buf> in(inputs.size()), out(out_types.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = Buf{inputs[i].impl()->data(), &in_types[i]};
  for (size_t i = 0; i < out_types.size(); ++i) {
    Array o =
        i < into.size() && into[i].valid() ? into[i] : detail::make_array(out_types[i], device);
    if (keep_sharding) detail::place(*o.impl(), first->placement, true);
    out[i] = Buf{o.impl()->data(), &o.impl()->aval};
    outs.push_back(std::move(o));
  }
  ExecContext ctx;
  ctx.device = device;
  ctx.threads = cpu::hardware_threads();
  // Outputs made here (not donated inputs' storage) may take storage the kernel hands over.
  struct Adopting {
    std::vector<Array>* outs;
    const std::vector<Array>* into;
  } adopting{&outs, &into};
  const ExecContext::OutputAdopter adopter{
      [](const void* self, size_t j, std::shared_ptr<runtime::Buffer> storage) {
        const Adopting& a = *static_cast<const Adopting*>(self);
        if (j >= a.outs->size() || (j < a.into->size() && (*a.into)[j].valid())) return false;
        detail::ArrayImpl& impl = *(*a.outs)[j].impl();
        if (impl.sharded || impl.offset != 0 || !impl.buffer) return false;
        if (!storage) return true;  // (asked whether it would)
        if (storage->bytes != impl.aval.nbytes()) return false;
        impl.buffer = std::move(storage);
        return true;
      },
      &adopting};
  ctx.adopt_output = &adopter;
  runtime::DeviceScope on_device(device);  // the kernel's scratch is the device's memory
  kernel_for(p, in_types, out_types)(p, in, out, ctx);
  return outs;
}

// Runs while the shared library is loaded, before any user code. ir's hook is constant-initialized
// and no initializer of the library runs a primitive, so their order does not matter.
[[maybe_unused]] const bool g_installed = (ir::install_eager_executor(&execute_eager_on_cpu), true);

}  // namespace
}  // namespace spmd::backend
