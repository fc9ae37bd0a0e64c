// pure_callback's rules: results as declared, vmap by a loop over the batch (a scan, one call
// per element) or one call on the whole batch, and no derivative (JAX's message).
#include "primitives/callback.h"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

#include "ir/trace.h"
#include "primitives/batching.h"
#include "primitives/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {
namespace {

const char* method_name(VmapMethod m) {
  switch (m) {
    case VmapMethod::sequential:
      return "sequential";
    case VmapMethod::expand_dims:
      return "expand_dims";
    case VmapMethod::broadcast_all:
      return "broadcast_all";
  }
  return "?";
}

// Avals as a tuple: "(f32[3],i32[],)".
std::string tuple_str(const std::vector<AbstractValue>& avals) {
  std::string s = "(";
  for (const auto& a : avals) s += a.str() + ",";
  return s + ")";
}

// The type of the exception being handled, demangled ("std::runtime_error").
std::string current_exception_type() {
  const std::type_info* t = abi::__cxa_current_exception_type();
  if (!t) return "an exception";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(t->name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : t->name();
}

}  // namespace

PureCallback::PureCallback(std::shared_ptr<const HostFn> fn, std::vector<AbstractValue> results,
                           VmapMethod vmap_method)
    : vmap_method(vmap_method), fn_(std::move(fn)), results_(std::move(results)) {
  for (auto& r : results_) {
    r.weak = false;
    shapes_.push_back(r.shape);
    dtypes_.push_back(r.dtype);
  }
}

Params PureCallback::params() const {
  return {{"callback", "<host function>"},
          {"result_avals", tuple_str(results_)},
          {"vmap_method", method_name(vmap_method)}};
}

std::vector<AbstractValue> PureCallback::abstract_eval(const std::vector<AbstractValue>&) const {
  return results_;
}

std::vector<Array> PureCallback::call(const std::vector<Array>& args) const {
  // The host function computes on concrete arrays: no trace of this thread records its ops.
  ir::NoTraceScope outside_traces;
  std::vector<Array> out;
  // A host function that throws fails the call with an spmd::Error that says which callback it
  // was (its arguments and declared results) and what it threw, as JAX's runtime error names the
  // failing callback; the user's exception stays reachable as the nested exception
  // (std::rethrow_if_nested).
  try {
    out = (*fn_)(args);
  } catch (...) {
    std::vector<AbstractValue> in;
    for (const Array& a : args) in.push_back(a.aval());
    std::string what = "(no message)";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::throw_with_nested(Error(detail::concat(
        "pure_callback: the host function called with ", tuple_str(in), " and declared to return ",
        tuple_str(results_), " threw ", current_exception_type(), ": ", what)));
  }
  if (out.size() != results_.size())
    fail("pure_callback: the callback returned ", out.size(),
         " arrays, but result_shape_dtypes "
         "declares ",
         results_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const AbstractValue& want = results_[i];
    if (!out[i].valid())
      fail("pure_callback: result ", i, " of the callback is an empty Array; expected ",
           want.str());
    if (out[i].shape() != want.shape)
      fail("pure_callback: the callback should have returned a result with shape ",
           shape_str(want.shape), " but returned ", shape_str(out[i].shape()), " (result ", i,
           ", declared ", want.str(), " by result_shape_dtypes)");
    if (out[i].dtype() != want.dtype)
      fail("pure_callback: the callback should have returned a result with dtype ",
           dtype_name(want.dtype), " but returned ", dtype_name(out[i].dtype()), " (result ", i,
           ", declared ", want.str(), " by result_shape_dtypes)");
  }
  return out;
}

Batched PureCallback::batch(const BatchContext& ctx, const std::vector<Array>& in,
                            const std::vector<int>& dims) const {
  const int64_t n = ctx.axis_size;
  Batched r;
  bool any_batched = false;
  for (int d : dims) any_batched = any_batched || d != not_mapped;
  if (!any_batched) {
    r.values = spmd::bind(std::make_shared<PureCallback>(fn_, results_, vmap_method), in);
    r.dims.assign(r.values.size(), not_mapped);
    return r;
  }
  if (vmap_method == VmapMethod::sequential) {
    // One call per batch element: a scan over the batched operands, as lax::map makes it (the
    // unbatched ones are its constants).
    std::vector<Array> xs;
    std::vector<AbstractValue> slices;
    for (size_t i = 0; i < in.size(); ++i)
      if (dims[i] != not_mapped) {
        xs.push_back(batch_at(in[i], dims[i], 0, n));
        slices.push_back(xs.back().aval());
        slices.back().shape.erase(slices.back().shape.begin());
      }
    auto self = std::make_shared<PureCallback>(fn_, results_, vmap_method);
    ir::Traced body = ir::trace(slices, [&](const std::vector<Array>& slice) {
      std::vector<Array> args;
      size_t k = 0;
      for (size_t i = 0; i < in.size(); ++i)
        args.push_back(dims[i] != not_mapped ? slice[k++] : in[i]);
      return spmd::bind(self, args);
    });
    const int num_consts = static_cast<int>(body.captured.size());
    Closed closed = close_over(std::move(body.program), std::move(body.captured), 0);
    std::vector<Array> operands = std::move(closed.captured);
    operands.insert(operands.end(), xs.begin(), xs.end());
    r.values =
        spmd::bind(std::make_shared<Scan>(closed.program, num_consts, 0, n, false, 1), operands);
  } else {
    // One call on the whole batch, the batch axis first in every argument and result.
    std::vector<Array> args;
    for (size_t i = 0; i < in.size(); ++i) {
      if (dims[i] != not_mapped)
        args.push_back(batch_at(in[i], dims[i], 0, n));
      else if (vmap_method == VmapMethod::expand_dims)
        args.push_back(expand_dims(in[i], 0));
      else
        args.push_back(batch_at(in[i], not_mapped, 0, n));
    }
    std::vector<AbstractValue> batched = results_;
    for (auto& t : batched) t.shape.insert(t.shape.begin(), n);
    r.values = spmd::bind(std::make_shared<PureCallback>(fn_, batched, vmap_method), args);
  }
  r.dims.assign(r.values.size(), 0);
  return r;
}

std::vector<Array> PureCallback::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                     const std::vector<Array>&) const {
  fail(
      "Pure callbacks do not support JVP (nor VJP). Please use spmd::custom_vjp or "
      "spmd::custom_jvp to use callbacks while taking gradients.");
}

}  // namespace spmd::prim
