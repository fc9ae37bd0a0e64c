// Data + tensor parallel training of an MLP on a 2-D device mesh with shard_map, checked
// against the same training on one device.
//
// The mesh is ("data", "model"), 2 x 4 by default (8 emulated CPU devices). The batch is split
// over "data". The first layer is column-parallel: each "model" device holds a block of W1's
// columns (and of b1) and computes its block of the hidden units; the second layer is
// row-parallel: each holds the matching block of W2's rows, and the partial logits are summed
// over "model" (psum). Gradients are averaged over "data"; so is the loss.
//
// grad inside the body follows JAX's shard_map (check_vma): a parameter is the same on every
// device along the axes its spec leaves out, and its gradient comes back summed over the
// devices of those axes that its loss varies over — here over "data" for every parameter (each
// "data" device holds the same blocks and sees its own batch block), while the psum over "model"
// passes its cotangent through unsummed. So the body's loss is its data block's share of the
// global mean (divided by the "data" size), and the gradients need no collective.
//
//   mesh_mlp [--data 2] [--model 4] [--steps 30] [--batch 64] [--hidden 128] [--lr 0.2]
//   mpirun -np 2 mesh_mlp --devices 4 [--model-spans-processes]
//
// Under mpirun the mesh spans every process's devices (--devices: each process's count): with
// the devices in order, "model" lies inside each process and "data" across them; with
// --model-spans-processes the devices of each "model" group are taken from different processes,
// so the psums over "model" cross processes. Every process runs the one-device reference too
// and gathers the mesh's parameters (multihost_utils::process_allgather) to compare.
//
// Prints the loss per step for both runs and the largest relative difference of the final
// parameters; exits with 1 when it exceeds --tolerance.
#include <spmd/spmd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

using namespace spmd;

namespace {

struct Config {
  int data = 2, model = 4, steps = 30;
  int devices = 0;           // this process's devices (0: data * model, one process)
  bool model_spans = false;  // lay "model" groups across processes
  int64_t batch = 64, in = 32, hidden = 128, classes = 10;
  double lr = 0.2, tolerance = 1e-4;
  uint32_t seed = 0;
};

struct Params {
  Array w1, b1, w2, b2;
};

// Labels from a fixed random "teacher" network, so the loss has something to learn.
std::pair<Array, Array> batch_of(const Config& c, int step) {
  Array key = random::fold_in(random::key(c.seed + 1), static_cast<uint32_t>(step));
  Array x = random::normal(key, {c.batch, c.in});
  Array teacher = random::normal(random::key(c.seed + 2), {c.in, c.classes});
  Array y = argmax(matmul(x, teacher), 1);
  return {x, astype(y, DType::Int32)};
}

Params init(const Config& c) {
  Array k = random::key(c.seed);
  return {
      random::normal(random::fold_in(k, 1), {c.in, c.hidden}) * (1.0 / std::sqrt(c.in)),
      zeros({c.hidden}),
      random::normal(random::fold_in(k, 2), {c.hidden, c.classes}) * (1.0 / std::sqrt(c.hidden)),
      zeros({c.classes})};
}

// The reference: the whole model on one device.
Array loss_one(const Array& w1, const Array& b1, const Array& w2, const Array& b2, const Array& x,
               const Array& y) {
  Array h = nn::relu(matmul(x, w1) + b1);
  return nn::cross_entropy(matmul(h, w2) + b2, y);
}

int run(const Config& c) {
  set_cpu_device_count(c.devices > 0 ? c.devices : c.data * c.model);
  distributed::initialize();  // under mpirun: every process joins
  if (device_count() != c.data * c.model)
    fail("the mesh needs --data x --model = ", c.data * c.model, " devices, but there are ",
         device_count(), " (", process_count(), " process(es) of ", local_device_count(), ")");
  // Position (i, j) on device i * model + j (devices in order), or on device j * data + i: then
  // the "model" group at "data" row i takes every data-th device, from several processes.
  std::vector<Device> order;
  for (int i = 0; i < c.data; ++i)
    for (int j = 0; j < c.model; ++j)
      order.push_back(devices().at(c.model_spans ? j * c.data + i : i * c.model + j));
  Mesh mesh({c.data, c.model}, {"data", "model"}, order);
  const bool print = process_index() == 0;
  if (print)
    std::printf(
        "mesh %s over %d process(es): batch split over 'data', hidden units (%lld) over "
        "'model'%s\n",
        mesh.str().c_str(), process_count(), static_cast<long long>(c.hidden),
        c.model_spans ? " (model groups across processes)" : "");
  const double data_size = c.data;
  const float lr = static_cast<float>(c.lr);

  // One training step on each device's blocks.
  auto body = [data_size, lr](const Array& w1, const Array& b1, const Array& w2, const Array& b2,
                              const Array& x, const Array& y) {
    auto local_loss = [&](const Array& w1, const Array& b1, const Array& w2, const Array& b2) {
      Array h = nn::relu(matmul(x, w1) + b1);            // column-parallel: (batch/d, hidden/m)
      Array logits = psum(matmul(h, w2), "model") + b2;  // row-parallel, summed over "model"
      return nn::cross_entropy(logits, y) / data_size;   // this block's share of the mean
    };
    // Each gradient is already the sum over "data" of the blocks' shares: the global mean's.
    auto [loss, g] = value_and_grad(local_loss, argnums<0, 1, 2, 3>)(w1, b1, w2, b2);
    auto [g1, gb1, g2, gb2] = g;
    Array mean_loss = psum(loss, "data");
    return std::make_tuple(w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2, mean_loss);
  };
  const PartitionSpec w1_spec = P(none, "model"), b1_spec = P("model"), w2_spec = P("model", none),
                      b2_spec = P();
  auto step =
      jit(shard_map(body, mesh, {w1_spec, b1_spec, w2_spec, b2_spec, P("data", none), P("data")},
                    {w1_spec, b1_spec, w2_spec, b2_spec, P()}));
  auto step_one = jit([lr](const Array& w1, const Array& b1, const Array& w2, const Array& b2,
                           const Array& x, const Array& y) {
    auto [loss, g] = value_and_grad(loss_one, argnums<0, 1, 2, 3>)(w1, b1, w2, b2, x, y);
    auto [g1, gb1, g2, gb2] = g;
    return std::make_tuple(w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2, loss);
  });

  Params mesh_p = init(c), one_p = init(c);
  for (int s = 0; s < c.steps; ++s) {
    auto [x, y] = batch_of(c, s);
    Array loss_mesh, loss_one_dev;
    std::tie(mesh_p.w1, mesh_p.b1, mesh_p.w2, mesh_p.b2, loss_mesh) =
        step(mesh_p.w1, mesh_p.b1, mesh_p.w2, mesh_p.b2, x, y);
    std::tie(one_p.w1, one_p.b1, one_p.w2, one_p.b2, loss_one_dev) =
        step_one(one_p.w1, one_p.b1, one_p.w2, one_p.b2, x, y);
    if (print && (s % std::max(1, c.steps / 10) == 0 || s + 1 == c.steps))
      std::printf("step %3d  loss: mesh %.6f  one device %.6f\n", s, loss_mesh.item<double>(),
                  loss_one_dev.item<double>());
  }
  double worst = 0;
  const char* names[] = {"w1", "b1", "w2", "b2"};
  const Array* a[] = {&mesh_p.w1, &mesh_p.b1, &mesh_p.w2, &mesh_p.b2};
  const Array* b[] = {&one_p.w1, &one_p.b1, &one_p.w2, &one_p.b2};
  for (int k = 0; k < 4; ++k) {
    Array whole = multihost_utils::process_allgather(*a[k]);  // every process's blocks
    double scale = max(abs(*b[k])).item<double>();
    double diff = max(abs(whole - *b[k])).item<double>() / std::max(scale, 1e-30);
    if (print)
      std::printf("  %s: max |mesh - one device| / max |one device| = %.3g\n", names[k], diff);
    worst = std::max(worst, diff);
  }
  bool ok = worst <= c.tolerance;
  if (print)
    std::printf(
        "max relative difference of the parameters after %d steps: %.3g (tolerance %.3g): %s\n",
        c.steps, worst, c.tolerance, ok ? "equal to one-device training" : "DIFFERENT");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Data + tensor parallel MLP training on a 2-D mesh with shard_map"};
  app.add_option("--data", c.data, "devices along the 'data' axis")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--model", c.model, "devices along the 'model' axis")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--steps", c.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--batch", c.batch, "global batch (a multiple of --data)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "hidden units (a multiple of --model)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--tolerance", c.tolerance, "largest relative parameter difference accepted")
      ->capture_default_str();
  app.add_option("--seed", c.seed, "random seed")->capture_default_str();
  app.add_option("--devices", c.devices,
                 "this process's devices (default --data x --model; under mpirun, per process)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--model-spans-processes", c.model_spans,
               "take each 'model' group's devices from different processes");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(c);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
