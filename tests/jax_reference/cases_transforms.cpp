// The spmd side of corpus_transforms.py: vmap's axes and nesting, grad / vjp / jvp / jacobians
// composed, custom_jvp and custom_vjp under grad, jvp and vmap.
#include "reference.h"

namespace spmd::jax_reference {
namespace {

using A = const Array&;
using lax::NoXs;

Array f32(const Array& a) { return astype(a, DType::Float32); }

const auto log1pexp =
    custom_jvp([](A x) { return log1p(exp(x)); },
               [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                 auto [x] = p;
                 auto [tx] = t;
                 return std::pair(log1p(exp(x)), tx * (1.0 - 1.0 / (1.0 + exp(x))));
               });

// Deliberately not the true derivative (2 tx y + x ty): checks the rule is what is used.
const auto prod2 =
    custom_jvp([](A x, A y) { return x * y; },
               [](const std::tuple<Array, Array>& p, const std::tuple<Array, Array>& t) {
                 auto [x, y] = p;
                 auto [tx, ty] = t;
                 return std::pair(x * y, 2.0 * tx * y + x * ty);
               });

const auto clip_gradient =
    custom_vjp([](A x) { return x; }, [](A x) { return std::pair(x, NoXs{}); },
               [](const NoXs&, A g) { return clip(g, -0.5, 0.5); });

// x's cotangent scaled by 3: the rule is what is used.
const auto sin_res =
    custom_vjp([](A x, A y) { return sin(x) * y; },
               [](A x, A y) {
                 return std::pair(sin(x) * y, std::tuple<Array, Array, Array>(cos(x), sin(x), y));
               },
               [](const std::tuple<Array, Array, Array>& r, A g) {
                 auto [c, s, y] = r;
                 return std::tuple<Array, Array>(c * y * g * 3.0, s * g);
               });

}  // namespace

SPMD_JAX_REFERENCE_FAMILY(transforms) {
  // Sums of products accumulated in another order than XLA's (see cases_ad_ops.cpp).
  const Tolerance accum = tolerance(1e-5, 1e-5);

  // ---- vmap: in_axes, out_axes, nesting ----
  c.add("vmap_in_axes_1_none", [](const Inputs& x) {
    return outs(vmap([](A a, A v) { return a * v; }, {1, none})(x[0], x[1]));
  });
  c.add("vmap_out_axes_1",
        [](const Inputs& x) { return outs(vmap([](A a) { return sin(a) * 2.0; }, 0, 1)(x[0])); });
  c.add(
      "vmap_in_1_0_out_1",
      [](const Inputs& x) {
        return outs(vmap([](A a, A b) { return matmul(a, b); }, {1, 0}, 1)(x[0], x[1]));
      },
      accum);
  c.add("vmap_negative_axes",
        [](const Inputs& x) { return outs(vmap([](A a) { return sum(a, 0); }, -1, -1)(x[0])); });
  c.add("vmap_out_axes_tuple", [](const Inputs& x) {
    auto [s, sq] = vmap([](A a) { return std::pair(sum(a), a * a); }, 0, {0, 1})(x[0]);
    return outs(s, sq);
  });
  c.add("vmap_out_axes_none", [](const Inputs& x) {
    auto [p, q] = vmap([](A a, A b) { return std::pair(a * 2.0, b + 1.0); }, {0, none}, {0, none})(
        x[0], x[1]);
    return outs(p, q);
  });
  c.add("vmap_axis_size", [](const Inputs& x) {
    return outs(vmap([](A a) { return a * 2.0; }, none, 0, "", 3)(x[0]));
  });
  c.add(
      "vmap_vmap_vdot",
      [](const Inputs& x) {
        return outs(vmap(vmap([](A a, A b) { return vdot(a, b); }))(x[0], x[1]));
      },
      accum);
  c.add("vmap_vmap_outer", [](const Inputs& x) {
    return outs(vmap(vmap([](A a, A b) { return a * b + 1.0; }, {0, none}), {none, 0})(x[0], x[1]));
  });
  c.add(
      "vmap_vmap_axes",
      [](const Inputs& x) {
        return outs(vmap(vmap([](A a) { return sum(a * a); }, 1), 0, 1)(x[0]));
      },
      accum);
  c.add(
      "vmap_matmul_lhs",
      [](const Inputs& x) {
        return outs(vmap([](A a, A b) { return matmul(a, b); }, {0, none})(x[0], x[1]));
      },
      accum);
  c.add(
      "vmap_matmul_rhs",
      [](const Inputs& x) {
        return outs(vmap([](A a, A b) { return matmul(a, b); }, {none, 2})(x[0], x[1]));
      },
      accum);
  c.add("vmap_dict", [](const Inputs& x) {
    using D = std::map<std::string, Array>;
    AxisSpec axes{AxisSpec(std::map<std::string, AxisSpec>{{"a", 0}, {"b", none}})};
    return outs(vmap([](const D& d) { return d.at("a") * sum(d.at("b")); },
                     axes)(D{{"a", x[0]}, {"b", x[1]}}));
  });
  c.add("vmap_psum", [](const Inputs& x) {
    return outs(vmap([](A a) { return a / psum(abs(a), "i"); }, 0, 0, "i")(x[0]));
  });
  c.add("vmap_pmax_pmean", [](const Inputs& x) {
    auto [mx, mean, mn] = vmap(
        [](A a) { return std::tuple(pmax(a, "i"), pmean(a, "i"), pmin(a, "i")); }, 0, 0, "i")(x[0]);
    return outs(mx, mean, mn);
  });
  c.add("vmap_all_gather", [](const Inputs& x) {
    return outs(vmap([](A a) { return all_gather(a, "i") * 2.0; }, 0, 0, "i")(x[0]));
  });
  c.add("vmap_axis_index", [](const Inputs& x) {
    return outs(vmap([](A a) { return a * f32(axis_index("i")); }, 0, 0, "i")(x[0]));
  });
  c.add("vmap_nested_psum", [](const Inputs& x) {
    return outs(vmap(vmap([](A a) { return psum(a, {"i", "j"}); }, 0, 0, "j"), 0, 0, "i")(x[0]));
  });
  c.add(
      "vmap_of_jit",
      [](const Inputs& x) {
        return outs(vmap(jit([](A a, A b) { return matmul(tanh(a), b); }))(x[0], x[1]));
      },
      accum);

  // ---- grad ----
  c.add("grad_of_grad", [](const Inputs& x) {
    return outs(grad(grad([](A a) { return sin(a) * power(a, 3); }))(x[0]));
  });
  c.add("grad_grad_grad", [](const Inputs& x) {
    return outs(grad(grad(grad([](A a) { return exp(a) * cos(a); })))(x[0]));
  });
  c.add(
      "grad_of_grad_vector",
      [](const Inputs& x) {
        auto inner = grad([](A u) { return sum(square(tanh(u))); });
        return outs(grad([inner](A v) { return sum(inner(v) * v); })(x[0]));
      },
      accum);
  auto f2 = [](A a, A b) { return sum(square(tanh(matmul(a, b)))); };
  c.add(
      "grad_argnums_01",
      [f2](const Inputs& x) {
        auto [ga, gb] = grad(f2, argnums<0, 1>)(x[0], x[1]);
        return outs(ga, gb);
      },
      accum);
  c.add(
      "grad_argnums_1", [f2](const Inputs& x) { return outs(grad(f2, argnums<1>)(x[0], x[1])); },
      accum);
  c.add(
      "value_and_grad",
      [](const Inputs& x) {
        auto [v, g] = value_and_grad([](A a) { return sum(sin(a) * a); })(x[0]);
        return outs(v, g);
      },
      accum);
  c.add(
      "value_and_grad_aux",
      [](const Inputs& x) {
        auto [va, g] =
            value_and_grad([](A a) { return std::pair(sum(square(a)), max(a, 0)); }, has_aux)(x[0]);
        return outs(va.first, va.second, g);
      },
      accum);
  c.add(
      "grad_aux",
      [](const Inputs& x) {
        auto [g, aux] =
            grad([](A a, A b) { return std::pair(sum(a * b), std::pair(a + b, sum(b))); }, has_aux)(
                x[0], x[1]);
        return outs(g, aux.first, aux.second);
      },
      accum);
  c.add(
      "grad_dict",
      [](const Inputs& x) {
        using D = std::map<std::string, Array>;
        Array in = x[2];
        D g = grad([in](const D& p) { return sum(tanh(matmul(in, p.at("w")) + p.at("b"))); })(
            D{{"w", x[0]}, {"b", x[1]}});
        return outs(g["b"], g["w"]);
      },
      accum);
  c.add(
      "grad_of_vmap",
      [](const Inputs& x) {
        return outs(grad(
            [](A a) { return sum(vmap([](A u, A v) { return dot(u, v); })(a, sin(a))); })(x[0]));
      },
      accum);
  c.add("vmap_of_grad", [](const Inputs& x) {
    return outs(vmap(grad([](A v) { return sum(square(tanh(v))); }))(x[0]));
  });
  c.add("vmap_of_grad_in_axes", [](const Inputs& x) {
    return outs(vmap(grad([](A v, A w) { return sum(sin(v * w)); }), {1, none})(x[0], x[1]));
  });
  c.add("grad_of_jit", [](const Inputs& x) {
    return outs(grad(jit([](A a) { return sum(exp(a) / (1.0 + a * a)); }))(x[0]));
  });
  c.add("grad_stop_gradient", [](const Inputs& x) {
    return outs(grad([](A a) { return sum(a * square(stop_gradient(a)) + sin(a)); })(x[0]));
  });
  c.add("grad_checkpoint", [](const Inputs& x) {
    return outs(
        grad([](A a) { return sum(checkpoint([](A u) { return sin(cos(u)) * u; })(a)); })(x[0]));
  });
  c.add("grad_complex_input", [](const Inputs& x) {
    return outs(grad([](A z) { return sum(square(abs(z)) + real(z * z)); })(x[0]));
  });
  c.add("grad_integer_pow", [](const Inputs& x) {
    return outs(grad([](A a) { return sum(power(a, 3) + power(a, -2)); })(x[0]));
  });

  // ---- vjp, jvp, linearize ----
  c.add("vjp_two_outputs", [](const Inputs& x) {
    auto [out, pull] =
        vjp([](A a, A b) { return std::pair(sin(a) * b, sum(a * b, 0)); }, x[0], x[1]);
    auto [ga, gb] = pull(std::pair(x[2], x[3]));
    return outs(ga, gb);
  });
  c.add("vjp_has_aux", [](const Inputs& x) {
    auto [out, pull, aux] = vjp([](A u) { return std::pair(exp(u), sum(u)); }, x[0], has_aux);
    auto [g] = pull(x[1]);
    return outs(out, g, aux);
  });
  c.add(
      "jvp_two_args",
      [](const Inputs& x) {
        auto [p, t] = jvp([](A u, A v) { return matmul(tanh(u), v); }, std::tuple(x[0], x[1]),
                          std::tuple(x[2], x[3]));
        return outs(p, t);
      },
      accum);
  c.add("jvp_has_aux", [](const Inputs& x) {
    auto [p, t, aux] = jvp([](A u) { return std::pair(cos(u), u * 2.0); }, x[0], x[1], has_aux);
    return outs(p, t, aux);
  });
  c.add("jvp_of_grad", [](const Inputs& x) {
    auto [p, t] = jvp(grad([](A u) { return sum(power(sin(u), 3)); }), x[0], x[1]);
    return outs(p, t);
  });
  c.add(
      "linearize",
      [](const Inputs& x) {
        auto [out, f_jvp] = linearize([](A u) { return exp(u) * sum(u); }, x[0]);
        return outs(out, f_jvp(x[1]), f_jvp(x[2]));
      },
      accum);
  c.add("vmap_of_jvp", [](const Inputs& x) {
    auto [p, t] = vmap([](A a, A t) { return jvp([](A u) { return sin(u); }, a, t); })(x[0], x[1]);
    return outs(p, t);
  });

  // ---- Jacobians ----
  auto fj = [](A v) { return stack({sum(sin(v)), v[0] * v[1], prod(v)}); };
  c.add("jacfwd", [fj](const Inputs& x) { return outs(jacfwd(fj)(x[0])); });
  c.add("jacrev", [fj](const Inputs& x) { return outs(jacrev(fj)(x[0])); });
  auto fm = [](A m) { return matmul(tanh(m), transpose(m)); };
  c.add(
      "jacfwd_matrix", [fm](const Inputs& x) { return outs(jacfwd(fm)(x[0])); }, accum);
  c.add(
      "jacrev_matrix", [fm](const Inputs& x) { return outs(jacrev(fm)(x[0])); }, accum);
  auto fab = [](A a, A b) { return a * sum(b); };
  c.add("jacfwd_argnums", [fab](const Inputs& x) {
    auto [ja, jb] = jacfwd(fab, argnums<0, 1>)(x[0], x[1]);
    return outs(ja, jb);
  });
  c.add("jacrev_argnums", [fab](const Inputs& x) {
    auto [ja, jb] = jacrev(fab, argnums<0, 1>)(x[0], x[1]);
    return outs(ja, jb);
  });
  c.add("jacrev_has_aux", [](const Inputs& x) {
    auto [j, aux] = jacrev([](A a) { return std::pair(sin(a), sum(a)); }, has_aux)(x[0]);
    return outs(j, aux);
  });
  c.add("hessian", [](const Inputs& x) {
    return outs(hessian([](A v) { return sum(sin(v) * square(flip(v, 0))); })(x[0]));
  });
  c.add(
      "hessian_matrix",
      [](const Inputs& x) {
        return outs(hessian([](A m) { return sum(tanh(matmul(m, m))); })(x[0]));
      },
      tolerance(1e-12, 1e-13));  // float64 sums of products: see accum
  c.add("jacfwd_of_jacrev", [](const Inputs& x) {
    return outs(jacfwd(jacrev([](A v) { return exp(v) * v[0]; }))(x[0]));
  });

  // ---- custom_jvp / custom_vjp ----
  c.add("custom_jvp_value", [](const Inputs& x) { return outs(log1pexp(x[0])); });
  c.add("custom_jvp_grad",
        [](const Inputs& x) { return outs(grad([](A a) { return sum(log1pexp(a) * a); })(x[0])); });
  c.add("custom_jvp_jvp", [](const Inputs& x) {
    auto [p, t] = jvp([](A a) { return log1pexp(a); }, x[0], x[1]);
    return outs(p, t);
  });
  c.add("custom_jvp_vmap",
        [](const Inputs& x) { return outs(vmap([](A a) { return log1pexp(a); })(x[0])); });
  c.add("custom_jvp_vmap_grad", [](const Inputs& x) {
    return outs(vmap(grad([](A a) { return sum(square(log1pexp(a))); }))(x[0]));
  });
  c.add("custom_jvp_grad_of_grad", [](const Inputs& x) {
    return outs(grad(grad([](A a) { return log1pexp(a) * a; }))(x[0]));
  });
  c.add("custom_jvp_two_args_grad", [](const Inputs& x) {
    auto [ga, gb] = grad([](A a, A b) { return sum(prod2(a, b)); }, argnums<0, 1>)(x[0], x[1]);
    return outs(ga, gb);
  });
  c.add("custom_jvp_two_args_vmap", [](const Inputs& x) {
    return outs(vmap([](A a, A b) { return prod2(a, b); }, {0, none})(x[0], x[1]));
  });
  c.add("custom_vjp_clip_grad", [](const Inputs& x) {
    return outs(grad([](A a, A w) { return sum(clip_gradient(a) * w); })(x[0], x[1]));
  });
  c.add("custom_vjp_clip_vmap_grad", [](const Inputs& x) {
    return outs(
        vmap(grad([](A a, A w) { return sum(clip_gradient(a) * w); }), {0, none})(x[0], x[1]));
  });
  c.add("custom_vjp_value", [](const Inputs& x) { return outs(sin_res(x[0], x[1])); });
  c.add("custom_vjp_grad", [](const Inputs& x) {
    auto [ga, gb] = grad([](A a, A b) { return sum(sin_res(a, b)); }, argnums<0, 1>)(x[0], x[1]);
    return outs(ga, gb);
  });
  c.add("custom_vjp_vmap", [](const Inputs& x) {
    return outs(vmap([](A a, A b) { return sin_res(a, b); }, {0, none})(x[0], x[1]));
  });
  c.add("custom_vjp_vmap_grad", [](const Inputs& x) {
    auto [ga, gb] =
        vmap(grad([](A a, A b) { return sum(sin_res(a, b)); }, argnums<0, 1>))(x[0], x[1]);
    return outs(ga, gb);
  });
  c.add("custom_vjp_grad_of_vmap", [](const Inputs& x) {
    return outs(grad([](A a, A b) {
      return sum(square(vmap([](A u, A v) { return sin_res(u, v); })(a, b)));
    })(x[0], x[1]));
  });
  c.add("custom_vjp_under_jit_grad", [](const Inputs& x) {
    return outs(grad(jit([](A a) { return sum(sin_res(a, a * 2.0)); }))(x[0]));
  });
}

}  // namespace spmd::jax_reference
