// The spmd side of corpus_pmap.py: pmap on 8 devices with every collective, in_axes / out_axes
// variants, axis_index_groups, and grad through pmap.
#include "reference.h"

namespace spmd::jax_reference {
namespace {

using A = const Array&;
constexpr int N = 8;

template <class F>
auto pm(F f, PmapOptions o = {}) {
  return pmap(std::move(f), "i", std::move(o));
}

std::vector<std::pair<int, int>> ring() {
  std::vector<std::pair<int, int>> r;
  for (int k = 0; k < N; ++k) r.emplace_back(k, (k + 1) % N);
  return r;
}

Array loss(A w, A xb) { return sum(square(tanh(matmul(xb, w)))); }

}  // namespace

SPMD_JAX_REFERENCE_FAMILY(pmap) {
  // Sums of products (and all-reduces, whose order of summation over the replicas may differ
  // from XLA's) in float32: a few ulps of the terms' magnitude (see cases_ad_ops.cpp).
  const Tolerance accum = tolerance(1e-5, 1e-5);
  const AxisIndexGroups halves{{0, 1, 2, 3}, {4, 5, 6, 7}};
  const AxisIndexGroups pairs{{0, 4}, {1, 5}, {2, 6}, {3, 7}};

  // ---- reductions ----
  c.add(
      "psum", [](const Inputs& x) { return outs(pm([](A a) { return psum(a, "i"); })(x[0])); },
      accum);
  c.add("psum_int",
        [](const Inputs& x) { return outs(pm([](A a) { return psum(a, "i"); })(x[0])); });
  c.add("psum_bool",
        [](const Inputs& x) { return outs(pm([](A a) { return psum(a > 0, "i"); })(x[0])); });
  c.add(
      "pmean", [](const Inputs& x) { return outs(pm([](A a) { return pmean(a, "i"); })(x[0])); },
      accum);
  c.add("pmax", [](const Inputs& x) { return outs(pm([](A a) { return pmax(a, "i"); })(x[0])); });
  c.add("pmin", [](const Inputs& x) { return outs(pm([](A a) { return pmin(a, "i"); })(x[0])); });
  c.add("pmax_int",
        [](const Inputs& x) { return outs(pm([](A a) { return pmax(a, "i"); })(x[0])); });
  c.add(
      "psum_f64", [](const Inputs& x) { return outs(pm([](A a) { return psum(a, "i"); })(x[0])); },
      tolerance(1e-12, 1e-13));  // float64 sums in another order
  c.add(
      "psum_scalar",
      [](const Inputs& x) { return outs(pm([](A a) { return psum(sum(a), "i"); })(x[0])); }, accum);
  c.add(
      "psum_groups_halves",
      [halves](const Inputs& x) {
        return outs(pm([halves](A a) { return psum(a, "i", halves); })(x[0]));
      },
      accum);
  c.add("psum_groups_pairs", [pairs](const Inputs& x) {
    return outs(pm([pairs](A a) { return psum(a, "i", pairs); })(x[0]));
  });
  c.add("pmean_groups", [pairs](const Inputs& x) {
    return outs(pm([pairs](A a) { return pmean(a, "i", pairs); })(x[0]));
  });
  c.add(
      "normalize",
      [](const Inputs& x) {
        return outs(pm([](A a) { return a / psum(sum(abs(a)), "i"); })(x[0]));
      },
      accum);

  // ---- data movement ----
  c.add(
      "all_gather",
      [](const Inputs& x) { return outs(pm([](A a) { return all_gather(a, "i"); })(x[0])); },
      exact());
  c.add(
      "all_gather_axis1",
      [](const Inputs& x) { return outs(pm([](A a) { return all_gather(a, "i", 1); })(x[0])); },
      exact());
  c.add(
      "all_gather_tiled",
      [](const Inputs& x) {
        return outs(pm([](A a) { return all_gather(a, "i", 0, true); })(x[0]));
      },
      exact());
  c.add(
      "all_gather_tiled_axis1",
      [](const Inputs& x) {
        return outs(pm([](A a) { return all_gather(a, "i", 1, true); })(x[0]));
      },
      exact());
  c.add("all_gather_int",
        [](const Inputs& x) { return outs(pm([](A a) { return all_gather(a, "i"); })(x[0])); });
  c.add(
      "all_gather_groups",
      [halves](const Inputs& x) {
        return outs(pm([halves](A a) { return all_gather(a, "i", 0, false, halves); })(x[0]));
      },
      exact());
  c.add(
      "psum_scatter",
      [](const Inputs& x) { return outs(pm([](A a) { return psum_scatter(a, "i"); })(x[0])); },
      accum);
  c.add(
      "psum_scatter_tiled",
      [](const Inputs& x) {
        return outs(pm([](A a) { return psum_scatter(a, "i", 0, true); })(x[0]));
      },
      accum);
  c.add(
      "psum_scatter_dim1",
      [](const Inputs& x) {
        return outs(pm([](A a) { return psum_scatter(a, "i", 1, true); })(x[0]));
      },
      accum);
  c.add(
      "all_to_all",
      [](const Inputs& x) { return outs(pm([](A a) { return all_to_all(a, "i", 0, 0); })(x[0])); },
      exact());
  c.add(
      "all_to_all_concat1",
      [](const Inputs& x) { return outs(pm([](A a) { return all_to_all(a, "i", 0, 1); })(x[0])); },
      exact());
  c.add(
      "all_to_all_tiled",
      [](const Inputs& x) {
        return outs(pm([](A a) { return all_to_all(a, "i", 1, 0, true); })(x[0]));
      },
      exact());
  c.add(
      "ppermute_ring",
      [](const Inputs& x) { return outs(pm([](A a) { return ppermute(a, "i", ring()); })(x[0])); },
      exact());
  c.add(
      "ppermute_partial",
      [](const Inputs& x) {
        return outs(pm([](A a) { return ppermute(a, "i", {{0, 3}, {3, 0}, {5, 6}}); })(x[0]));
      },
      exact());
  c.add("ppermute_int", [](const Inputs& x) {
    return outs(pm([](A a) { return ppermute(a, "i", ring()); })(x[0]));
  });
  c.add(
      "pshuffle",
      [](const Inputs& x) {
        return outs(pm([](A a) { return pshuffle(a, "i", {3, 1, 7, 0, 2, 6, 5, 4}); })(x[0]));
      },
      exact());
  c.add("axis_index",
        [](const Inputs& x) { return outs(pm([](A a) { return a * axis_index("i"); })(x[0])); });
  c.add("axis_index_float", [](const Inputs& x) {
    return outs(pm([](A a) { return a + astype(axis_index("i"), DType::Float32) * 10.0; })(x[0]));
  });
  c.add("halo_stencil", [](const Inputs& x) {
    return outs(pm([](A a) {
      std::vector<std::pair<int, int>> left;
      for (int k = 0; k < N; ++k) left.emplace_back((k + 1) % N, k);
      return a * -2.0 + ppermute(a, "i", ring()) + ppermute(a, "i", left);
    })(x[0]));
  });

  // ---- in_axes / out_axes ----
  c.add(
      "in_axes_none",
      [](const Inputs& x) {
        return outs(
            pm([](A a, A b) { return a * b + psum(a, "i"); }, {.in_axes = {0, none}})(x[0], x[1]));
      },
      accum);
  c.add(
      "in_axes_1",
      [](const Inputs& x) {
        return outs(pm([](A a) { return psum(a, "i") * a; }, {.in_axes = 1})(x[0]));
      },
      accum);
  c.add("out_axes_1", [](const Inputs& x) {
    return outs(pm([](A a) { return sin(a); }, {.out_axes = 1})(x[0]));
  });
  c.add(
      "in_1_out_1",
      [](const Inputs& x) {
        return outs(pm([](A a, A b) { return matmul(a, b); }, {.in_axes = {1, 0}, .out_axes = 1})(
            x[0], x[1]));
      },
      accum);
  c.add(
      "tuple_out",
      [](const Inputs& x) {
        auto [m, s] = pm([](A a) { return std::pair(pmax(a, "i"), sum(a)); })(x[0]);
        return outs(m, s);
      },
      accum);
  c.add(
      "dict_in",
      [](const Inputs& x) {
        using D = std::map<std::string, Array>;
        return outs(pm([](const D& d) { return d.at("a") * psum(d.at("b"), "i"); })(
            D{{"a", x[0]}, {"b", x[1]}}));
      },
      accum);

  // ---- composed with other transformations ----
  c.add(
      "pmap_vmap_psum",
      [](const Inputs& x) {
        return outs(pm(vmap([](A a) { return psum(a, {"i", "j"}); }, 0, 0, "j"))(x[0]));
      },
      accum);
  c.add(
      "pmap_vmap_dot",
      [](const Inputs& x) {
        return outs(pm(vmap([](A a, A b) { return dot(a, b); }))(x[0], x[1]));
      },
      accum);
  c.add(
      "pmap_of_jit",
      [](const Inputs& x) { return outs(pm(jit([](A a) { return psum(tanh(a), "i"); }))(x[0])); },
      accum);
  c.add(
      "pmap_scan",
      [](const Inputs& x) {
        return outs(pm([](A a) {
          return lax::scan([](A cr, A v) { return std::pair(psum(cr * v, "i"), cr); }, Array(1.0f),
                           a)
              .first;
        })(x[0]));
      },
      accum);
  c.add("pmap_cond_axis_index", [](const Inputs& x) {
    return outs(pm([](A a) {
      return lax::cond(
          equal(remainder(axis_index("i"), 2), 0), [](A v) { return sin(v); },
          [](A v) { return cos(v); }, a);
    })(x[0]));
  });

  // ---- grad through pmap ----
  c.add(
      "grad_pmean_step",
      [](const Inputs& x) {
        return outs(pm([](A w, A b) { return pmean(grad(loss)(w, b), "i"); },
                       {.in_axes = {none, 0}})(x[0], x[1]));
      },
      accum);
  c.add(
      "value_and_grad_psum",
      [](const Inputs& x) {
        auto [v, g] = pm(
            [](A w, A b) {
              auto [val, gw] = value_and_grad(loss)(w, b);
              return std::pair(psum(val, "i"), psum(gw, "i"));
            },
            {.in_axes = {none, 0}})(x[0], x[1]);
        return outs(v, g);
      },
      accum);
  c.add(
      "grad_of_pmap",
      [](const Inputs& x) {
        return outs(grad([](A w, A b) {
          return sum(pm(loss, {.in_axes = {none, 0}})(w, b));
        })(x[0], x[1]));
      },
      accum);
  c.add(
      "grad_of_pmap_psum",
      [](const Inputs& x) {
        return outs(
            grad([](A a) { return sum(pm([](A v) { return psum(v * v, "i") * v; })(a)); })(x[0]));
      },
      accum);
  c.add(
      "grad_of_pmap_all_gather",
      [](const Inputs& x) {
        return outs(grad([](A a) {
          return sum(pm([](A v) { return sin(all_gather(v, "i")) * v[0]; })(a));
        })(x[0]));
      },
      accum);
  c.add("grad_of_pmap_ppermute", [](const Inputs& x) {
    return outs(grad([](A a, A u) {
      return sum(pm([](A v, A w) { return ppermute(v, "i", ring()) * w; })(a, u));
    })(x[0], x[1]));
  });
  c.add(
      "vmap_of_pmap",
      [](const Inputs& x) {
        return outs(vmap(pm([](A a) { return psum(a, "i") * a; }), 1, 1)(x[0]));
      },
      accum);
}

}  // namespace spmd::jax_reference
