// float16 and bfloat16 on the CPU: stored at their size, computed in float32. A kernel whose
// operands or results are 16-bit floats runs on float32 copies of the operands and its results
// are rounded once (to nearest even) into their 16-bit storage -- XLA's CPU backend does the
// same (its float-normalization pass upcasts what the hardware cannot compute in 16 bits). So
// reductions and products accumulate in float32 and round once, and elementwise ops give the
// correctly rounded 16-bit result of the float32 op (exact for +, -, *, / and sqrt: float32
// has more than twice the bits). Conversions (convert_element_type) have their own 16-bit
// kernel, and so do data movement (broadcast, transpose, slices: bytes); collectives move
// 16-bit floats at their size (a bfloat16 psum moves half the bytes of
// a float32 one; the communicators combine in float32, runtime/reduce_buffers.cpp); programs
// with sub-programs (loops, conds, pmap) and host callbacks run as they are: their bodies' ops
// are widened one by one.
#include <memory>
#include <vector>

#include "compile/kernel.h"
#include "base/allocator.h"
#include "base/dtype_visit.h"
#include "base/half.h"
#include "primitives/callback.h"
#include "primitives/pmap_call.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::backend {
namespace {

using cpu::is_half;


// Kernels that copy elements as bytes (backend/cpu/kernels_shape.cpp): they run at 16 bits.
bool moves_bytes(const Primitive& p) {
  return dynamic_cast<const prim::BroadcastInDim*>(&p) || dynamic_cast<const prim::Reshape*>(&p) ||
         dynamic_cast<const prim::Transpose*>(&p) || dynamic_cast<const prim::Slice*>(&p) ||
         dynamic_cast<const prim::Rev*>(&p) || dynamic_cast<const prim::Concatenate*>(&p);
}

void widened_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                    ExecContext& ctx) {
  std::vector<AbstractValue> wide_in(in.size()), wide_out;
  std::vector<std::shared_ptr<runtime::Buffer>> held;
  std::vector<Buf> in2(in.begin(), in.end()), out2(out.begin(), out.end());
  for (size_t i = 0; i < in.size(); ++i) {
    wide_in[i] = *in[i].aval;
    if (!is_half(wide_in[i].dtype)) continue;
    wide_in[i].dtype = DType::Float32;
    held.push_back(runtime::allocate(std::max<size_t>(wide_in[i].nbytes(), 1)));
    cpu::cast_buffer(in[i].data, in[i].aval->dtype, held.back()->data, DType::Float32,
                     wide_in[i].size());
    in2[i] = Buf{held.back()->data, &wide_in[i]};
  }
  // iota of a 16-bit type: the float32 iota, rounded.
  std::shared_ptr<const Primitive> iota;
  if (auto* io = dynamic_cast<const prim::Iota*>(&p))
    iota = std::make_shared<prim::Iota>(io->shape, DType::Float32, io->dimension);
  const Primitive& run = iota ? *iota : p;
  wide_out = run.abstract_eval(wide_in);
  if (wide_out.size() != out.size()) fail("internal: widened ", p.name(), " changed its arity");
  std::vector<std::shared_ptr<runtime::Buffer>> wide_results(out.size());
  for (size_t j = 0; j < out.size(); ++j) {
    if (!is_half(out[j].aval->dtype)) {
      out2[j] = Buf{out[j].data, &wide_out[j]};
      continue;
    }
    if (wide_out[j].dtype != DType::Float32)
      fail("no CPU kernel for ", p.name(), " producing ", out[j].aval->str(),
           "; expected float32 operands to give a float32 result to round");
    wide_results[j] = runtime::allocate(std::max<size_t>(wide_out[j].nbytes(), 1));
    out2[j] = Buf{wide_results[j]->data, &wide_out[j]};
  }
  find_kernel(run)(run, in2, out2, ctx);
  for (size_t j = 0; j < out.size(); ++j)
    if (wide_results[j])
      cpu::cast_buffer(wide_results[j]->data, DType::Float32, out[j].data, out[j].aval->dtype,
                       out[j].aval->size());
}

}  // namespace

Kernel kernel_for(const Primitive& p, const std::vector<AbstractValue>& in,
                  const std::vector<AbstractValue>& out) {
  bool half = false, complex = false;
  for (const auto* types : {&in, &out})
    for (const AbstractValue& t : *types) {
      half = half || is_half(t.dtype);
      complex = complex || is_complex(t.dtype);
    }
  // Complex arithmetic has kernels of its own (backend/cpu/kernels_complex.cpp); the other
  // kernels serve complex arrays as they are (bytes moved) or refuse them by name.
  if (complex && !dynamic_cast<const prim::Convert*>(&p))
    if (Kernel k = find_complex_kernel(p)) return k;
  if (!half || dynamic_cast<const prim::Convert*>(&p) || !p.subprograms().empty() ||
      dynamic_cast<const prim::PmapCall*>(&p) || dynamic_cast<const prim::PureCallback*>(&p) ||
      !p.axis_names().empty() || moves_bytes(p))
    return find_kernel(p);
  return widened_kernel;
}

}  // namespace spmd::backend
