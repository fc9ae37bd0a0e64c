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

// An operand or result held as replica blocks (shard_map's, core/array_impl.h): per mesh
// position, its block's data.
std::vector<void*> block_table(const detail::ArrayImpl& impl) {
  std::vector<void*> table(impl.block_at.size(), nullptr);
  for (size_t pos = 0; pos < table.size(); ++pos)
    if (impl.block_at[pos] >= 0)
      table[pos] = impl.blocks[static_cast<size_t>(impl.block_at[pos])]->data;
  return table;
}

std::vector<Array> execute_eager_on_cpu(const Primitive& p, const std::vector<Array>& given,
                                        const std::vector<Array>& into) {
  const bool spmd_call = p.name() == "xla_pmap";
  // Arrays laid out on a mesh hold only this process's blocks. An op reads such an array whole
  // (its result on one device) when this process holds all of it, and otherwise it would need
  // the other processes' blocks, which only shard_map may use (a pmap, explicit SPMD, reads the
  // rows it maps of this host's view, the other processes' blocks as zeros). Replica blocks
  // (shard_map's operands) go to its SPMD call as they are.
  const std::vector<Array>* ins = &given;
  std::vector<Array> whole;
  std::vector<std::vector<void*>> tables;  // (made only for replica blocks)
  for (size_t i = 0; i < given.size(); ++i) {
    const detail::ArrayImpl& impl = detail::concrete(given[i], p.name().c_str());
    if (!impl.blocked()) continue;
    if (!impl.named) {
      if (!spmd_call) fail("internal error: replica blocks given to '", p.name(), "'");
      tables.resize(given.size());
      tables[i] = block_table(impl);
      continue;
    }
    if (whole.empty()) whole = given;
    if (!impl.named->is_fully_addressable() && !spmd_call)
      detail::check_not_partitioned(impl, p.name());
    whole[i] = detail::whole_array(given[i], p.name().c_str(), spmd_call);
  }
  if (!whole.empty()) ins = &whole;
  const std::vector<Array>& inputs = *ins;
  std::vector<AbstractValue> in_types;
  in_types.reserve(inputs.size());
  for (const Array& a : inputs) in_types.push_back(a.impl()->aval);
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
  for (size_t i = 0; i < inputs.size(); ++i)
    in[i] = i >= tables.size() || tables[i].empty() ? Buf{inputs[i].impl()->data(), &in_types[i]}
                                                    : Buf{nullptr, &in_types[i], tables[i].data()};
  std::vector<std::vector<void*>> out_tables;
  for (size_t i = 0; i < out_types.size(); ++i) {
    Array o =
        i < into.size() && into[i].valid() ? into[i] : detail::make_array(out_types[i], device);
    if (keep_sharding) detail::place(*o.impl(), first->placement, true);
    if (o.impl()->blocked()) {
      out_tables.resize(out_types.size());
      out_tables[i] = block_table(*o.impl());
      out[i] = Buf{nullptr, &o.impl()->aval, out_tables[i].data()};
    } else {
      out[i] = Buf{o.impl()->data(), &o.impl()->aval};
    }
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
