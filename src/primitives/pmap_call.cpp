#include "primitives/pmap_call.h"

#include <algorithm>

#include "ir/autodiff.h"
#include "ir/axis_env.h"
#include "ir/batch.h"
#include "ir/forward.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "primitives/batching.h"
#include "primitives/collectives.h"
#include "primitives/control_flow.h"
#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {

PmapCall::PmapCall(std::shared_ptr<const Program> body, std::string axis_name, int64_t size,
                   std::vector<int> in_axes, std::vector<int> out_axes, std::vector<int> devices,
                   int64_t global_size, std::vector<int> mesh_devices)
    : body(std::move(body)),
      axis_name(std::move(axis_name)),
      size(size),
      global_size(global_size > 0 ? global_size : size),
      in_axes(std::move(in_axes)),
      out_axes(std::move(out_axes)),
      devices(std::move(devices)),
      mesh_devices(std::move(mesh_devices)) {}

Params PmapCall::params() const {
  auto axes = [](const std::vector<int>& v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      s += v[i] == not_mapped ? std::string("None") : std::to_string(v[i]);
    }
    return s + (v.size() == 1 ? ",)" : ")");
  };
  return {{"axis_name", axis_name},
          {"axis_size", std::to_string(global_size)},
          {"in_axes", axes(in_axes)},
          {"out_axes", axes(out_axes)},
          {"body", body->str()}};
}

std::vector<AbstractValue> PmapCall::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (in.size() != body->inputs.size())
    fail("xla_pmap: expected ", body->inputs.size(), " inputs, got ", in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    AbstractValue per = in[i];
    if (in_axes[i] != not_mapped) {
      if (in_axes[i] >= per.ndim() || per.shape[in_axes[i]] != size)
        fail("xla_pmap: input ", i, " of type ", per.str(), " has no axis ", in_axes[i],
             " of size ", size);
      per.shape.erase(per.shape.begin() + in_axes[i]);
    }
    const AbstractValue& want = body->var_types[body->inputs[i]];
    if (per.shape != want.shape || per.dtype != want.dtype)
      fail("xla_pmap: input ", i, " per replica is ", per.str(), ", expected ", want.str());
  }
  std::vector<AbstractValue> out = body->output_types();
  for (size_t j = 0; j < out.size(); ++j)
    if (out_axes[j] != not_mapped) out[j].shape.insert(out[j].shape.begin() + out_axes[j], size);
  return out;
}

Batched PmapCall::batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& dims) const {
  // Push the batch inside: each replica's value carries the batch at axis 0.
  std::vector<Array> args;
  std::vector<int> new_in_axes, per_dims;
  std::vector<AbstractValue> per_types;
  for (size_t i = 0; i < in.size(); ++i) {
    Array x = in[i];
    int a = in_axes[i], b = dims[i];
    if (b == not_mapped) {
      args.push_back(x);
      new_in_axes.push_back(a);
      per_dims.push_back(not_mapped);
    } else if (a == not_mapped) {
      args.push_back(moveaxis(x, b, 0));
      new_in_axes.push_back(not_mapped);
      per_dims.push_back(0);
    } else {
      // Unbatched axis a of x is axis a' of the batched value.
      int full_a = a < b ? a : a + 1;
      std::vector<int> perm{full_a, b};
      for (int k = 0; k < x.ndim(); ++k)
        if (k != full_a && k != b) perm.push_back(k);
      args.push_back(transpose(x, perm));
      new_in_axes.push_back(0);
      per_dims.push_back(0);
    }
    AbstractValue t = args.back().aval();
    if (new_in_axes.back() != not_mapped) t.shape.erase(t.shape.begin() + new_in_axes.back());
    per_types.push_back(t);
  }
  std::vector<int> out_dims;
  // Inside the body, this pmap's axis shadows a vmap axis of the same name.
  BatchContext body_ctx = ctx;
  if (body_ctx.axis_name == axis_name) body_ctx.axis_name.clear();
  ir::Traced traced = ir::trace(per_types, [&](const std::vector<Array>& xs) {
    auto r = transforms::batch_eval(*body, xs, per_dims, body_ctx);
    std::vector<Array> outs;
    for (size_t j = 0; j < r.values.size(); ++j) {
      outs.push_back(r.dims[j] == not_mapped || r.dims[j] == 0
                         ? r.values[j]
                         : moveaxis(r.values[j], r.dims[j], 0));
      out_dims.push_back(r.dims[j] == not_mapped ? not_mapped : 0);
    }
    return outs;
  });
  std::vector<int> new_out_axes;
  std::vector<int> result_dims;
  for (size_t j = 0; j < out_axes.size(); ++j) {
    bool batched = out_dims[j] != not_mapped;
    if (out_axes[j] == not_mapped)
      new_out_axes.push_back(not_mapped);
    else
      new_out_axes.push_back(batched ? out_axes[j] + 1 : out_axes[j]);
    result_dims.push_back(batched ? 0 : not_mapped);
  }
  for (auto& c : traced.captured) {
    args.push_back(c);
    new_in_axes.push_back(not_mapped);
  }
  auto p = std::make_shared<PmapCall>(std::make_shared<Program>(std::move(traced.program)),
                                      axis_name, size, new_in_axes, new_out_axes, devices,
                                      global_size, mesh_devices);
  return {spmd::bind(p, args), result_dims};
}

std::vector<Array> PmapCall::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                                 const std::vector<Array>& cts) const {
  // The transpose is another pmap: each replica runs the vjp of the body on its slices of the
  // primals and of the output cotangents. A replicated output (out_axes None) is replica 0's
  // value, so only replica 0 receives its cotangent; cotangents of broadcast inputs are summed
  // over the replicas.
  std::vector<AbstractValue> per_types;
  std::vector<int> new_in_axes;
  std::vector<Array> args;
  for (size_t i = 0; i < primals.size(); ++i) {
    per_types.push_back(body->var_types[body->inputs[i]]);
    new_in_axes.push_back(in_axes[i]);
    args.push_back(primals[i]);
  }
  for (size_t j = 0; j < cts.size(); ++j) {
    AbstractValue t = body->output_types()[j];
    per_types.push_back(t);
    new_in_axes.push_back(out_axes[j]);
    args.push_back(cts[j]);
  }
  std::vector<bool> wrt(primals.size());
  for (size_t i = 0; i < primals.size(); ++i) wrt[i] = differentiable(per_types[i]);
  const size_t np = primals.size();
  ir::Traced traced = [&] {
    transforms::AxisScope scope(axis_name, global_size, transforms::AxisKind::Pmap);
    return ir::trace(per_types, [&](const std::vector<Array>& xs) {
      std::vector<Array> prim_args(xs.begin(), xs.begin() + static_cast<long>(np));
      transforms::Linearization lin(*body, prim_args, wrt);
      std::vector<Array> out_cts(xs.begin() + static_cast<long>(np), xs.end());
      for (size_t j = 0; j < out_cts.size(); ++j)
        if (out_axes[j] == not_mapped)
          out_cts[j] = where(equal(axis_index(axis_name), 0), out_cts[j], zeros_like(out_cts[j]));
      std::vector<Array> in_cts = lin.backward(out_cts), outs;
      for (size_t i = 0; i < np; ++i)
        if (wrt[i]) outs.push_back(in_cts[i]);
      return outs;
    });
  }();
  std::vector<int> ct_out_axes;
  for (size_t i = 0; i < np; ++i)
    if (wrt[i]) ct_out_axes.push_back(in_axes[i] == not_mapped ? 0 : in_axes[i]);
  for (auto& c : traced.captured) {
    args.push_back(c);
    new_in_axes.push_back(not_mapped);
  }
  auto p = std::make_shared<PmapCall>(std::make_shared<Program>(std::move(traced.program)),
                                      axis_name, size, new_in_axes, ct_out_axes, devices,
                                      global_size, mesh_devices);
  std::vector<Array> r = spmd::bind(p, args);
  std::vector<Array> result;
  size_t k = 0;
  for (size_t i = 0; i < np; ++i) {
    if (!wrt[i]) {
      result.push_back(Array());
      continue;
    }
    Array c = r[k++];
    result.push_back(in_axes[i] == not_mapped ? sum(c, std::vector<int>{0}) : c);
  }
  return result;
}

Primitive::Jvp PmapCall::jvp(const std::vector<Array>& primals,
                             const std::vector<Array>& tangents) const {
  // A pmap of the body's jvp: tangents are mapped like their primals (in_axes for inputs,
  // out_axes for outputs), so a replica differentiates its own slice.
  const size_t np = primals.size();
  std::vector<AbstractValue> per_types;
  std::vector<bool> has(np);
  for (size_t i = 0; i < np; ++i) {
    per_types.push_back(body->var_types[body->inputs[i]]);
    has[i] = tangents[i].valid() && differentiable(per_types[i]);
  }
  std::vector<int> new_in_axes = in_axes;
  std::vector<Array> args = primals;
  for (size_t i = 0; i < np; ++i)
    if (has[i]) {
      per_types.push_back(per_types[i]);
      new_in_axes.push_back(in_axes[i]);
      args.push_back(tangents[i]);
    }
  std::vector<bool> out_t = float_dependence(*body, has);
  const size_t nout = out_t.size();
  ir::Traced traced = [&] {
    transforms::AxisScope scope(axis_name, global_size, transforms::AxisKind::Pmap);
    return ir::trace(per_types, [&](const std::vector<Array>& xs) {
      return transforms::jvp_flat(*body, xs, has, out_t);
    });
  }();
  std::vector<int> new_out_axes = out_axes;
  for (size_t j = 0; j < nout; ++j)
    if (out_t[j]) new_out_axes.push_back(out_axes[j]);
  for (auto& c : traced.captured) {
    args.push_back(c);
    new_in_axes.push_back(not_mapped);
  }
  auto p = std::make_shared<PmapCall>(std::make_shared<Program>(std::move(traced.program)),
                                      axis_name, size, new_in_axes, new_out_axes, devices,
                                      global_size, mesh_devices);
  std::vector<Array> r = spmd::bind(p, args);
  Jvp out;
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(nout));
  out.tangents.resize(nout);
  for (size_t j = 0, k = nout; j < nout; ++j)
    if (out_t[j]) out.tangents[j] = r[k++];
  return out;
}

}  // namespace spmd::prim
