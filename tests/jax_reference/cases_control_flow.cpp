// The spmd side of corpus_control_flow.py: scan, fori_loop, while_loop, cond and switch under
// vmap (batched predicates too), grad and jvp.
#include "reference.h"

namespace spmd::jax_reference {
namespace {

using A = const Array&;
using lax::NoXs;
using AA = std::pair<Array, Array>;

AA cum(A c, A x) { return AA(c + x, c * x); }

AA rnn(A w, A h, A xs) {
  return lax::scan([w](A h, A x) { return AA(tanh(matmul(h, w) + x), sum(h)); }, h, xs);
}
Array rnn_loss(A w, A h, A xs) {
  auto [c, ys] = rnn(w, h, xs);
  return sum(square(c)) + sum(ys * 0.1);
}

Array fori_body(A i, A c) { return c * 0.8 + sin(c) * astype(i, c.dtype()); }

Array collatz_steps(A n) {
  auto body = [](const AA& s) {
    Array k = s.first;
    return AA(where(equal(remainder(k, 2), 0), floor_divide(k, 2), k * 3 + 1), s.second + 1);
  };
  return lax::while_loop([](const AA& s) { return s.first > 1; }, body,
                         AA(n, zeros({}, DType::Int32)))
      .second;
}

Array grow(A x, A limit) {
  return lax::while_loop([limit](A v) { return sum(v) < limit; }, [](A v) { return v * 1.5 + 0.1; },
                         x);
}

Array tf(A a, A b) { return sin(a) * b; }
Array ff(A a, A b) { return a - b * b; }
Array cond2(A p, A a, A b) { return lax::cond(p, tf, ff, a, b); }

Array sw(A i, A a) {
  std::vector<std::function<Array(const Array&)>> branches{
      [](A v) { return v * 2.0; }, [](A v) { return sin(v); }, [](A v) { return sum(v) + v; }};
  return lax::switch_(i, branches, a);
}

}  // namespace

SPMD_JAX_REFERENCE_FAMILY(control_flow) {
  // Sums of products accumulated in another order than XLA's (see cases_ad_ops.cpp).
  const Tolerance accum = tolerance(1e-5, 1e-5);

  // ---- scan ----
  c.add("scan", [](const Inputs& x) {
    auto [cr, ys] = lax::scan(cum, x[0], x[1]);
    return outs(cr, ys);
  });
  c.add("scan_reverse", [](const Inputs& x) {
    auto [cr, ys] = lax::scan(cum, x[0], x[1], {.reverse = true});
    return outs(cr, ys);
  });
  c.add("scan_no_xs", [](const Inputs& x) {
    auto [cr, ys] = lax::scan([](A c, const NoXs&) { return AA(c * 0.9 + 1.0, sum(c)); }, x[0],
                              NoXs{}, {.length = 4});
    return outs(cr, ys);
  });
  c.add("scan_pytree", [](const Inputs& x) {
    auto [cr, ys] = lax::scan(
        [](const AA& c, A v) {
          return std::pair(AA(c.first * v + c.second, c.second + 1), AA(c.first, v * 2.0));
        },
        AA(x[0], x[1]), x[2]);
    return outs(cr.first, cr.second, ys.first, ys.second);
  });
  c.add("scan_int", [](const Inputs& x) {
    auto [cr, ys] = lax::scan([](A c, A v) { return AA(c * 2 + v, c); }, x[0], x[1]);
    return outs(cr, ys);
  });
  c.add(
      "scan_rnn",
      [](const Inputs& x) {
        auto [cr, ys] = rnn(x[0], x[1], x[2]);
        return outs(cr, ys);
      },
      accum);
  c.add(
      "scan_vmap_xs",
      [](const Inputs& x) {
        auto [cr, ys] = vmap(rnn, {none, none, 0})(x[0], x[1], x[2]);
        return outs(cr, ys);
      },
      accum);
  c.add(
      "scan_vmap_carry",
      [](const Inputs& x) {
        auto [cr, ys] = vmap(rnn, {none, 0, none})(x[0], x[1], x[2]);
        return outs(cr, ys);
      },
      accum);
  c.add(
      "scan_vmap_all",
      [](const Inputs& x) {
        auto [cr, ys] = vmap(rnn, {0, 0, 1})(x[0], x[1], x[2]);
        return outs(cr, ys);
      },
      accum);
  c.add(
      "scan_grad",
      [](const Inputs& x) {
        auto [gw, gh, gx] = grad(rnn_loss, argnums<0, 1, 2>)(x[0], x[1], x[2]);
        return outs(gw, gh, gx);
      },
      accum);
  c.add(
      "scan_jvp",
      [](const Inputs& x) {
        Array xs = x[2];
        auto [p, t] = jvp([xs](A a, A b) { return rnn(a, b, xs); }, std::tuple(x[0], x[1]),
                          std::tuple(x[3], x[4]));
        return outs(p.first, p.second, t.first, t.second);
      },
      accum);
  c.add(
      "scan_vmap_grad",
      [](const Inputs& x) {
        return outs(vmap(grad(rnn_loss), {none, 0, none})(x[0], x[1], x[2]));
      },
      accum);
  c.add("scan_grad_reverse", [](const Inputs& x) {
    return outs(grad([](A c, A xs) {
      return sum(
          lax::scan([](A c, A v) { return AA(sin(c) * v, c); }, c, xs, {.reverse = true}).second);
    })(x[0], x[1]));
  });
  c.add("map",
        [](const Inputs& x) { return outs(lax::map([](A v) { return sum(sin(v)) * v; }, x[0])); });

  // ---- fori_loop ----
  c.add("fori", [](const Inputs& x) { return outs(lax::fori_loop(0, 5, fori_body, x[0])); });
  c.add(
      "fori_grad",
      [](const Inputs& x) {
        return outs(grad([](A c) { return sum(lax::fori_loop(0, 5, fori_body, c)); })(x[0]));
      },
      accum);  // a product of 5 steps' derivatives: rounding compounds (2.2x the default seen)
  c.add(
      "fori_grad_closure",
      [](const Inputs& x) {
        auto [gw, gc] = grad(
            [](A w, A c) {
              return sum(lax::fori_loop(
                  1, 4, [w](A, A v) { return tanh(matmul(w, v)); }, c));
            },
            argnums<0, 1>)(x[0], x[1]);
        return outs(gw, gc);
      },
      accum);
  c.add("fori_vmap", [](const Inputs& x) {
    return outs(vmap([](A c) { return lax::fori_loop(0, 5, fori_body, c); })(x[0]));
  });
  c.add("fori_vmap_traced_bound", [](const Inputs& x) {
    return outs(vmap([](A n, A c) {
      return lax::fori_loop(
          Array(0), n, [](A, A v) { return v * 2.0 + 1.0; }, c);
    })(x[0], x[1]));
  });
  c.add("fori_jvp", [](const Inputs& x) {
    auto [p, t] = jvp([](A a) { return lax::fori_loop(0, 4, fori_body, a); }, x[0], x[1]);
    return outs(p, t);
  });

  // ---- while_loop ----
  c.add("while_int", [](const Inputs& x) { return outs(collatz_steps(x[0])); });
  c.add("while_vmap_pred", [](const Inputs& x) { return outs(vmap(collatz_steps)(x[0])); });
  c.add("while_float", [](const Inputs& x) { return outs(grow(x[0], x[1])); });
  c.add("while_vmap_carry", [](const Inputs& x) {
    return outs(vmap(grow, {0, none})(x[0], x[1]));
  });
  c.add("while_vmap_limit", [](const Inputs& x) {
    return outs(vmap(grow, {none, 0})(x[0], x[1]));
  });
  c.add("while_jvp", [](const Inputs& x) {
    auto [p, t] = jvp([](A a) { return grow(a, 20.0); }, x[0], x[1]);
    return outs(p, t);
  });
  c.add("while_vmap_vmap", [](const Inputs& x) {
    auto f = [](A v, A n) {
      return lax::while_loop([n](const AA& s) { return s.second < n; },
                             [](const AA& s) { return AA(s.first * 2.0, s.second + 1); },
                             AA(v, zeros({}, DType::Int32)))
          .first;
    };
    return outs(vmap(vmap(f), {0, none})(x[0], x[1]));
  });

  // ---- cond and switch ----
  c.add("cond_true", [](const Inputs& x) { return outs(cond2(x[0], x[1], x[2])); });
  c.add("cond_false", [](const Inputs& x) { return outs(cond2(x[0], x[1], x[2])); });
  c.add("cond_vmap_pred", [](const Inputs& x) { return outs(vmap(cond2)(x[0], x[1], x[2])); });
  c.add("cond_vmap_operand", [](const Inputs& x) {
    return outs(vmap(cond2, {none, 0, none})(x[0], x[1], x[2]));
  });
  auto cond_grad = [](const Inputs& x) {
    auto [ga, gb] =
        grad([](A a, A b, A p) { return sum(cond2(p, a, b)); }, argnums<0, 1>)(x[0], x[1], x[2]);
    return outs(ga, gb);
  };
  c.add("cond_grad", cond_grad);
  c.add("cond_grad_false", cond_grad);
  c.add("cond_grad_data_pred", [](const Inputs& x) {
    return outs(grad([](A a) {
      return sum(lax::cond(
          sum(a) > 0.0, [](A v) { return exp(v); }, [](A v) { return cos(v); }, a));
    })(x[0]));
  });
  c.add("cond_vmap_grad", [](const Inputs& x) {
    return outs(vmap(grad([](A a, A b) { return sum(lax::cond(sum(a) > 0.0, tf, ff, a, b)); }))(
        x[0], x[1]));
  });
  c.add("cond_jvp", [](const Inputs& x) {
    Array b = x[1];
    auto [p, t] = jvp([b](A u) { return cond2(sum(u) < 0.0, u, b); }, x[0], x[2]);
    return outs(p, t);
  });
  c.add("cond_int_pred", [](const Inputs& x) {
    return outs(lax::cond(
        x[0], [](A v) { return v + 1.0; }, [](A v) { return v * 3.0; }, x[1]));
  });
  c.add("switch", [](const Inputs& x) { return outs(sw(x[0], x[1])); });
  c.add("switch_clamp_high", [](const Inputs& x) { return outs(sw(x[0], x[1])); });
  c.add("switch_clamp_low", [](const Inputs& x) { return outs(sw(x[0], x[1])); });
  c.add("switch_vmap_index", [](const Inputs& x) { return outs(vmap(sw)(x[0], x[1])); });
  c.add("switch_vmap_operand", [](const Inputs& x) {
    return outs(vmap(sw, {none, 0})(x[0], x[1]));
  });
  auto sw_loss = [](A a, A i) { return sum(square(sw(i, a))); };
  c.add("switch_grad", [sw_loss](const Inputs& x) { return outs(grad(sw_loss)(x[0], x[1])); });
  c.add("switch_vmap_grad",
        [sw_loss](const Inputs& x) { return outs(vmap(grad(sw_loss))(x[0], x[1])); });

  // ---- composed ----
  c.add("cond_in_scan_grad", [](const Inputs& x) {
    return outs(grad([](A c, A xs) {
      return sum(lax::scan(
                     [](A c, A v) {
                       Array n = lax::cond(
                           v > 0.0, [v](A u) { return u * v; }, [](A u) { return sin(u); }, c);
                       return AA(n, c);
                     },
                     c, xs)
                     .first);
    })(x[0], x[1]));
  });
  c.add(
      "scan_in_vmap_in_grad",
      [](const Inputs& x) {
        return outs(grad([](A w, A xs) {
          return sum(vmap([w](A row) {
            return lax::scan([w](A c, A xi) { return AA(c * w + xi, c); }, w * 0.0, row).first;
          })(xs));
        })(x[0], x[1]));
      },
      accum);
  c.add("while_in_cond_vmap", [](const Inputs& x) {
    return outs(vmap([](A p, A v) {
      return lax::cond(
          p,
          [](A u) {
            return lax::while_loop([](A s) { return s < 5.0; }, [](A s) { return s + 1.5; }, u);
          },
          [](A u) { return -u; }, v);
    })(x[0], x[1]));
  });
}

}  // namespace spmd::jax_reference
