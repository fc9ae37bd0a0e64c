// pure_callback: binds one pure_callback equation (executed at once outside a trace).
#include "spmd/callback.h"

#include "primitives/callback.h"
#include "spmd/error.h"

namespace spmd::detail {

std::vector<Array> pure_callback_call(std::shared_ptr<const HostFn> fn,
                                      std::vector<AbstractValue> results,
                                      const CallbackOptions& options,
                                      const std::vector<Array>& args) {
  for (const Array& a : args)
    if (!a.valid())
      fail("pure_callback: expected array arguments, got an empty (default-constructed) Array");
  auto p =
      std::make_shared<prim::PureCallback>(std::move(fn), std::move(results), options.vmap_method);
  return spmd::bind(p, args);
}

}  // namespace spmd::detail
