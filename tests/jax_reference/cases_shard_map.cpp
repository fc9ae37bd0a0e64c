// The spmd side of corpus_shard_map.py: shard_map on a 2x4 mesh ("x", "y") with the
// collectives over one axis and over both, and grad through shard_map.
#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(shard_map) {
  using A = const Array&;
  // Sums of products (and all-reduces in another order than XLA's) in float32: a few ulps of
  // the terms' magnitude (see cases_ad_ops.cpp).
  const Tolerance accum = tolerance(1e-5, 1e-5);
  const Mesh mesh = make_mesh({2, 4}, {"x", "y"});
  const MeshAxes both{"x", "y"};
  auto sm = [mesh](auto f, SpecTree in, SpecTree out) {
    return shard_map(std::move(f), mesh, std::move(in), std::move(out));
  };
  // One program of one argument: sm(f, in, out)(x[0]).
  auto one = [&c, sm](const std::string& name, std::function<Array(const Array&)> f,
                      PartitionSpec in, PartitionSpec out, std::optional<Tolerance> tol = {}) {
    c.add(
        name, [sm, f, in, out](const Inputs& x) { return outs(sm(f, in, out)(x[0])); }, tol);
  };

  // ---- reductions over one axis and both ----
  one(
      "psum_y", [](A a) { return psum(a, "y"); }, P("x", "y"), P("x", none), accum);
  one(
      "psum_x", [](A a) { return psum(a, "x"); }, P("x", "y"), P(none, "y"), accum);
  one(
      "psum_xy",
      [](A a) {
        return psum(a, {"x", "y"});
      },
      P("x", "y"), P(), accum);
  one(
      "psum_xy_int",
      [](A a) {
        return psum(a, {"x", "y"});
      },
      P("x", "y"), P());
  one(
      "pmean_xy",
      [](A a) {
        return pmean(a, {"x", "y"});
      },
      P("x", "y"), P(), accum);
  one(
      "pmax_y", [](A a) { return pmax(a, "y"); }, P("x", "y"), P("x", none));
  one(
      "pmin_x", [](A a) { return pmin(a, "x"); }, P("x", "y"), P(none, "y"));
  one(
      "pmax_xy_scalar",
      [](A a) {
        return pmax(max(a), {"x", "y"}).reshape({1});
      },
      P("x", "y"), P());
  one(
      "psum_yx_order",
      [](A a) {
        return psum(a, {"y", "x"});
      },
      P("x", "y"), P(), accum);

  // ---- data movement ----
  one(
      "all_gather_y", [](A a) { return all_gather(a, "y", 1, true); }, P("x", "y"), P("x", none));
  one(
      "all_gather_x_untiled", [](A a) { return all_gather(a, "x"); }, P("x", "y"),
      P(none, none, "y"));
  one(
      "all_gather_xy",
      [](A a) {
        return all_gather(a, {"x", "y"}, 0, true);
      },
      P(both), P());
  one(
      "ppermute_y",
      [](A a) {
        return ppermute(a, "y", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
      },
      P("x", "y"), P("x", "y"));
  one(
      "ppermute_x",
      [](A a) {
        return ppermute(a, "x", {{0, 1}, {1, 0}});
      },
      P("x", "y"), P("x", "y"));
  one(
      "axis_index_x", [](A a) { return a + astype(axis_index("x"), a.dtype()); }, P("x", "y"),
      P("x", "y"));
  one(
      "axis_index_y", [](A a) { return a * axis_index("y"); }, P("x", "y"), P("x", "y"));
  one(
      "axis_index_xy",
      [](A a) {
        return a * 0 + axis_index({"x", "y"});
      },
      P("x", "y"), P("x", "y"));
  one(
      "psum_scatter_y", [](A a) { return psum_scatter(a, "y", 1, true); }, P("x", none),
      P("x", "y"), accum);
  one(
      "psum_scatter_x_untiled", [](A a) { return psum_scatter(a, "x"); }, P(none, "y"), P(both),
      accum);
  one(
      "all_to_all_y", [](A a) { return all_to_all(a, "y", 0, 1, true); }, P("x", "y"), P("x", "y"));

  // ---- programs ----
  c.add(
      "matmul_tensor_parallel",
      [sm](const Inputs& x) {
        return outs(sm([](A a, A w) { return psum(matmul(a, w), "y"); },
                       {P("x", "y"), P("y", none)}, P("x", none))(x[0], x[1]));
      },
      accum);
  one(
      "layernorm_rows",
      [](A a) {
        Array mu = pmean(mean(a, 1, true), "y");
        Array ms = pmean(mean(a * a, 1, true), "y");
        return (a - mu) / sqrt(ms + 1e-5);
      },
      P("x", "y"), P("x", "y"), accum);
  c.add(
      "mixed_specs",
      [sm](const Inputs& x) {
        return outs(sm([](A a, A b) { return a * psum(sum(b), "x"); }, {P("x", "y"), P("x")},
                       P("x", "y"))(x[0], x[1]));
      },
      accum);
  one(
      "spec_multi_axis",
      [](A a) {
        return a * 2.0 + astype(axis_index({"x", "y"}), a.dtype());
      },
      P(both, none), P(both, none));
  c.add(
      "jit_shard_map",
      [sm](const Inputs& x) {
        return outs(
            jit(sm([](A a) { return psum(sin(a), "x"); }, P("x", "y"), P(none, "y")))(x[0]));
      },
      accum);

  // ---- grad through shard_map ----
  auto tp_loss = [sm](A a, A w) {
    Array y = sm([](A a, A w) { return psum(matmul(a, w), "y"); }, {P("x", "y"), P("y", none)},
                 P("x", none))(a, w);
    return sum(square(tanh(y)));
  };
  c.add(
      "grad_tensor_parallel",
      [tp_loss](const Inputs& x) {
        auto [ga, gw] = grad(tp_loss, argnums<0, 1>)(x[0], x[1]);
        return outs(ga, gw);
      },
      accum);
  c.add(
      "grad_psum_xy",
      [sm](const Inputs& x) {
        return outs(grad([sm](A a) {
          return sum(sm([](A b) { return psum(b * b, {"x", "y"}); }, P("x", "y"), P())(a));
        })(x[0]));
      },
      accum);
  c.add(
      "grad_ppermute",
      [sm](const Inputs& x) {
        return outs(grad([sm](A a) {
          return sum(square(sm(
              [](A b) {
                return ppermute(b, "y", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}) * b;
              },
              P("x", "y"), P("x", "y"))(a)));
        })(x[0]));
      },
      accum);
  auto grad_inside = [sm, both](const Inputs& x) {
    return outs(sm(
        [](A w, A b) {
          return pmean(grad([b](A v) { return sum(tanh(matmul(b, v))); })(w), {"x", "y"});
        },
        {P(), P(both)}, P())(x[0], x[1]));
  };
  // Inside the body (check_vma, the default) w, replicated (P()), is invariant: JAX's pvary of
  // it where it meets the varying b transposes to a psum, so grad(w) is the sum of the devices'
  // gradients; with check_vma = false each device keeps its own.
  c.add("grad_inside", grad_inside, accum);
  c.add(
      "grad_inside_no_vma",
      [mesh, both](const Inputs& x) {
        return outs(shard_map(
            [](A w, A b) {
              return pmean(grad([b](A v) { return sum(tanh(matmul(b, v))); })(w), {"x", "y"});
            },
            mesh, {P(), P(both)}, P(), {.check_vma = false})(x[0], x[1]));
      },
      accum);
  // Every device's result stacked.
  auto each = [](auto f) { return [f](A w, A b) { return expand_dims(f(w, b), 0); }; };
  auto tanh_loss = [](A w, A b) { return sum(tanh(matmul(b, w))); };
  auto two = [&c, sm, accum](const std::string& name, std::function<Array(A, A)> f,
                             PartitionSpec in0, PartitionSpec in1, PartitionSpec out) {
    c.add(
        name,
        [sm, f, in0, in1, out](const Inputs& x) {
          return outs(sm(f, {in0, in1}, out)(x[0], x[1]));
        },
        accum);
  };
  two("grad_inside_each", each([tanh_loss](A w, A b) { return grad(tanh_loss)(w, b); }), P(),
      P(both), P(both));
  // A psum'd loss: psum's transpose is a pvary (no second sum); w's pvary still sums.
  two("grad_inside_psum_loss", each([tanh_loss](A w, A b) {
        return grad([&](A v) { return psum(tanh_loss(v, b), {"x", "y"}); })(w);
      }),
      P(), P(both), P(both));
  // w varies over "x", not "y": summed over "y" only.
  two("grad_inside_vary_x", each([tanh_loss](A w, A b) { return grad(tanh_loss)(w, b); }), P("x"),
      P(both), P(both));
  two(
      "grad_inside_varying_arg",
      [tanh_loss](A w, A b) { return grad(tanh_loss, argnums<1>)(w, b); }, P(), P(both), P(both));
  one(
      "grad_inside_psum_varying",
      [](A a) { return grad([](A v) {
                  return psum(sum(v * v), {"x", "y"});
                })(a); }, P("x", "y"),
      P("x", "y"), accum);
  two("value_and_grad_inside", each([tanh_loss](A w, A b) {
        auto [v, g] = value_and_grad(tanh_loss)(w, b);
        return concatenate({ravel(v), ravel(g)});
      }),
      P(), P(both), P(both));
  two("vmap_grad_inside",
      each([tanh_loss](A ws, A b) { return vmap([&](A w) { return grad(tanh_loss)(w, b); })(ws); }),
      P(), P(both), P(both));
  auto scan_loss = [](A w, A b) {
    auto [h, ys] = lax::scan(
        [w](A h, A r) {
          Array n = tanh(matmul(r, w) + h);
          return std::pair(n, sum(n));
        },
        zeros({2}, w.dtype()), b);
    return sum(ys) + sum(h);
  };
  two("grad_scan_inside", each([scan_loss](A w, A b) { return grad(scan_loss)(w, b); }), P(),
      P(both), P(both));
  c.add(
      "jvp_inside",
      [mesh, both](const Inputs& x) {
        return outs(shard_map(
            [](A w, A b, A t) { return jvp([b](A v) { return tanh(matmul(b, v)); }, w, t).second; },
            mesh, {P(), P(both), P()}, P(both))(x[0], x[1], x[2]));
      },
      accum);
}

}  // namespace spmd::jax_reference
