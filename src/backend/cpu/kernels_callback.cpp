// pure_callback's kernel: the runtime's buffers copied into concrete Arrays, the user's host
// function called on them, its (checked) results copied into the output buffers.
#include <cstring>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "primitives/callback.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

void pure_callback_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                          ExecContext&) {
  const auto& c = backend::as<prim::PureCallback>(p);
  std::vector<Array> args;
  args.reserve(in.size());
  for (const Buf& b : in) args.emplace_back(b.data, b.aval->shape, b.aval->dtype);
  std::vector<Array> results = c.call(args);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].aval->nbytes() > 0)
      std::memcpy(out[i].data, results[i].data(), out[i].aval->nbytes());
}

}  // namespace

void register_callback_kernels() {
  backend::register_kernel(typeid(prim::PureCallback), pure_callback_kernel);
}

}  // namespace spmd::cpu
