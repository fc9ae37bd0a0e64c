#pragma once
// pure_callback: an equation that calls a user's host function (held by the primitive) on
// concrete arrays when the program runs. It declares its results' shapes and dtypes, so it
// traces without calling; vmap loops over the batch or calls once on it (VmapMethod); it has
// no derivative of its own (custom_vjp / custom_jvp give it one).
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "primitives/declare.h"
#include "spmd/primitive.h"

namespace spmd::prim {

// The host function over flat arrays (spmd::detail::HostFn, the same type).
using HostFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

class PureCallback final : public PrimitiveOf<PureCallback> {
 public:
  PureCallback(std::shared_ptr<const HostFn> fn, std::vector<AbstractValue> results,
               VmapMethod vmap_method);
  // The same function is the same callback: identity by the function object held.
  auto key() const { return std::tie(fn_, shapes_, dtypes_, vmap_method); }
  VmapMethod vmap_method;
  const std::vector<AbstractValue>& results() const { return results_; }

  // Runs the function on concrete arrays outside any trace; throws unless it returned arrays of
  // the declared shapes and dtypes.
  std::vector<Array> call(const std::vector<Array>& args) const;

  std::string name() const override { return "pure_callback"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;

 private:
  std::shared_ptr<const HostFn> fn_;
  std::vector<AbstractValue> results_;
  std::vector<Shape> shapes_;
  std::vector<DType> dtypes_;
};

}  // namespace spmd::prim
