// Kernels of scan, while and cond: each runs its compiled bodies through an Executable::Frame
// set up once per call, so an iteration costs only the body's own kernels. Loop carries live in
// two buffers that swap roles each iteration (updated in place, no allocation per iteration);
// xs slices are read and ys slices written in place in the operands and results. Bodies run
// with the ExecContext the kernel was given, under sub-sites of its equation's site (kernel.h).
#include <cstring>

#include "backend/cpu/register.h"
#include "base/allocator.h"
#include "compile/compiled_bodies.h"
#include "compile/executable.h"
#include "compile/kernel.h"
#include "primitives/control_flow.h"
#include "primitives/custom_call.h"
#include "primitives/remat.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;
using compile::Executable;

// Two buffers per carried value: the current carry and the next one.
class CarryBuffers {
 public:
  explicit CarryBuffers(std::span<const Buf> init) {
    size_t total = 0;
    for (auto& b : init) {
      offsets_.push_back(total);
      bytes_.push_back(b.aval->nbytes());
      total += (b.aval->nbytes() + 63) / 64 * 64;
    }
    storage_ = runtime::allocate(std::max<size_t>(2 * total, 64));
    char* base = static_cast<char*>(storage_->data);
    for (size_t j = 0; j < init.size(); ++j) {
      cur_.push_back(base + offsets_[j]);
      next_.push_back(base + total + offsets_[j]);
      if (bytes_[j]) std::memcpy(cur_[j], init[j].data, bytes_[j]);
    }
  }
  std::vector<void*>& cur() { return cur_; }
  std::vector<void*>& next() { return next_; }
  void swap() { cur_.swap(next_); }
  void copy_out(std::span<const Buf> out) {
    for (size_t j = 0; j < cur_.size(); ++j)
      if (bytes_[j]) std::memcpy(out[j].data, cur_[j], bytes_[j]);
  }

 private:
  std::shared_ptr<runtime::Buffer> storage_;
  std::vector<size_t> offsets_, bytes_;
  std::vector<void*> cur_, next_;
};

void scan_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext& ctx) {
  const auto& s = backend::as<prim::Scan>(p);
  const size_t nc = static_cast<size_t>(s.num_consts), nk = static_cast<size_t>(s.num_carry);
  const size_t nx = in.size() - nc - nk, ny = out.size() - nk;
  const int64_t n = s.length;
  CarryBuffers carry(in.subspan(nc, nk));
  if (n == 0) return carry.copy_out(out.subspan(0, nk));
  Executable::Frame frame(compile::compiled_body(s, 0));
  std::vector<void*> args(nc + nk + nx), results(nk + ny);
  std::vector<size_t> x_bytes(nx), y_bytes(ny);
  for (size_t i = 0; i < nc; ++i) args[i] = in[i].data;
  for (size_t k = 0; k < nx; ++k)
    x_bytes[k] = in[nc + nk + k].aval->nbytes() / static_cast<size_t>(n);
  for (size_t k = 0; k < ny; ++k) y_bytes[k] = out[nk + k].aval->nbytes() / static_cast<size_t>(n);
  for (int64_t t = 0; t < n; ++t) {
    const size_t i = static_cast<size_t>(s.reverse ? n - 1 - t : t);
    const bool last = t + 1 == n;
    for (size_t j = 0; j < nk; ++j) {
      args[nc + j] = carry.cur()[j];
      results[j] = last ? out[j].data : carry.next()[j];
    }
    for (size_t k = 0; k < nx; ++k) args[nc + nk + k] = in[nc + nk + k].as<char>() + i * x_bytes[k];
    for (size_t k = 0; k < ny; ++k) results[nk + k] = out[nk + k].as<char>() + i * y_bytes[k];
    frame.run(args, results, ctx);
    carry.swap();
  }
}

void while_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                  ExecContext& ctx) {
  const auto& w = backend::as<prim::While>(p);
  const size_t ncc = static_cast<size_t>(w.cond_consts), nbc = static_cast<size_t>(w.body_consts);
  const size_t nk = out.size();
  CarryBuffers carry(in.subspan(ncc + nbc, nk));
  Executable::Frame cond(compile::compiled_body(w, 0)), body(compile::compiled_body(w, 1));
  std::vector<void*> cond_args(ncc + nk), body_args(nbc + nk);
  for (size_t i = 0; i < ncc; ++i) cond_args[i] = in[i].data;
  for (size_t i = 0; i < nbc; ++i) body_args[i] = in[ncc + i].data;
  bool pred = false;
  void* pred_ptr = &pred;
  // The condition's collectives and the body's have sites of their own (kernel.h).
  const uint64_t site = ctx.site;
  for (;;) {
    for (size_t j = 0; j < nk; ++j) cond_args[ncc + j] = body_args[nbc + j] = carry.cur()[j];
    ctx.site = backend::sub_site(site, 0);
    cond.run(cond_args, std::span<void* const>(&pred_ptr, 1), ctx);
    if (!pred) break;
    ctx.site = backend::sub_site(site, 1);
    body.run(body_args, carry.next(), ctx);
    carry.swap();
  }
  ctx.site = site;
  carry.copy_out(out);
}

// Body k run once on the operands, straight into the results.
void run_once(const prim::ControlFlow& c, size_t k, std::span<const Buf> in,
              std::span<const Buf> out, ExecContext& ctx) {
  std::vector<void*> args, results;
  for (auto& i : in) args.push_back(i.data);
  for (auto& o : out) results.push_back(o.data);
  Executable::Frame frame(compile::compiled_body(c, k));
  frame.run(args, results, ctx);
}

void cond_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext& ctx) {
  const auto& c = backend::as<prim::Cond>(p);
  int64_t n = static_cast<int64_t>(c.branches().size());
  int64_t k = std::min<int64_t>(std::max<int64_t>(*in[0].as<int32_t>(), 0), n - 1);
  // Each branch's collectives have sites of their own (kernel.h): replicas that take different
  // branches are reported even when the branches call identical-looking collectives.
  const uint64_t site = ctx.site;
  ctx.site = backend::sub_site(site, static_cast<uint64_t>(k));
  run_once(c, static_cast<size_t>(k), in.subspan(1), out, ctx);
  ctx.site = site;
}

// custom_vjp_call, custom_jvp_call, checkpoint, call: run as they are, they run their function.
void call_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext& ctx) {
  run_once(static_cast<const prim::ControlFlow&>(p), 0, in, out, ctx);
}

}  // namespace

void register_control_flow_kernels() {
  backend::register_kernel(typeid(prim::CustomVjpCall), call_kernel);
  backend::register_kernel(typeid(prim::CustomJvpCall), call_kernel);
  backend::register_kernel(typeid(prim::Checkpoint), call_kernel);
  backend::register_kernel(typeid(prim::Call), call_kernel);
  backend::register_kernel(typeid(prim::Scan), scan_kernel);
  backend::register_kernel(typeid(prim::While), while_kernel);
  backend::register_kernel(typeid(prim::Cond), cond_kernel);
}

}  // namespace spmd::cpu
