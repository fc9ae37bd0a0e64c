// The code generator: LoopKernels to native loops through LLVM ORC (the only file that sees
// LLVM's headers, with object_cache.cpp's use of its SHA-256).
//
// Why LLVM and not C++ for the system compiler (MLX's CPU route): measured on this machine, one
// small kernel takes ~23 ms through ORC (IR build 0.5 ms, optimisation 10 ms, machine code 12 ms)
// against ~130 ms for g++ -O3 -shared (process start-up and headers dominate) and ~300 ms for
// clang++; the run time of the loop is the same. A training step has about ten groups, so only the
// in-process route fits a first call of ~150 ms. The new kernels of one compilation are spread
// over one module per core, each optimised (LLVM's O2 pipeline) and turned into an object on its
// own thread with its own TargetMachine; ORC only links the objects.
//
// Compiled kernels are kept for the process, and with a compilation cache directory
// (spmd/compilation_cache.h, codegen/object_cache.h) as object files that later runs and other
// processes link without compiling.
//
// Loop structure. A kernel iterates over its root's elements, row by row (the last axis is the
// inner loop, the others index the row); each thread gets a range of elements. Every index a
// node is read at is tracked as an affine form `a*j + c` in the inner index j where possible
// (slices scale and shift it, rev negates it, transpose and broadcast move it between axes).
// Pad and concatenate test their index against bounds; when the index is affine in j with a
// known offset, the points where a test flips are compile-time constants, so the inner loop is
// split there into segments, each with every such test folded: inside a segment a pad reads
// its operand or yields its value and a concatenate reads exactly one piece, through contiguous
// (vectorisable) loads, as a hand-written stencil loop does with its boundary cells peeled off.
// Tests that depend only on the row are computed once per row (their loads stay contiguous);
// the rest (interior padding, reshapes that split the inner axis) test and clamp per element.
//
// Arithmetic is IEEE op by op (no contraction to FMA, no reassociation), and transcendental
// functions call the same libm functions the interpreter's kernels call, so results equal the
// interpreter's bit for bit; only reductions reassociate (to vectorise their accumulation).
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "codegen/loop_kernel.h"
#include "codegen/object_cache.h"
#include "core/rational_tanh.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::codegen {
namespace {

using llvm::BasicBlock;
using llvm::Function;
using llvm::IRBuilder;
using llvm::Type;
using llvm::Value;
using prim::BinaryOp;
using prim::UnaryOp;

// Segments per row beyond which a kernel tests per element instead (each segment is a copy of
// the loop body).
constexpr size_t kMaxBreakpoints = 48;
// Reductions of at most this many elements per output are unrolled inside a loop over the
// outputs (vectorised across outputs: a dot of 3-vectors), longer ones loop over their row.
constexpr int64_t kUnrolledRow = 16;

template <class T>
T check(llvm::Expected<T> v, const char* what) {
  if (!v) fail("code generator: ", what, ": ", llvm::toString(v.takeError()));
  return std::move(*v);
}

// The process-wide JIT: one LLJIT whose modules live as long as the process (kernels are cached
// by their key, so each is compiled once).
struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::optional<llvm::orc::JITTargetMachineBuilder> builder;
  unsigned threads = 1;  // modules compiled at once
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const Compiled>> cache;
  uint64_t functions = 0;
  // What a kernel's machine code depends on besides its key, for the persistent cache: the
  // library's version and build (a rebuilt library may generate other code for the same key),
  // the target and its CPU features, and the optimisation options.
  std::string environment;

  // A kernel's function name in the persistent cache: its entry's id, the same in every process.
  std::string cached_name(const std::string& key) const {
    return "spmd_k" + entry_id(environment, key);
  }

  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "host detection");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Default);
    // LLVM 14 does not know the newest CPUs by name ("generic"); pick the x86-64 level their
    // features reach so the cost model is not that of a 2003 CPU.
    if (jtmb.getCPU().empty() || jtmb.getCPU() == "generic") {
      const auto& f = jtmb.getFeatures().getFeatures();
      auto has = [&](const char* name) {
        return std::find(f.begin(), f.end(), std::string("+") + name) != f.end();
      };
      if (jtmb.getTargetTriple().isX86())
        jtmb.setCPU(has("avx512f") && has("avx512vl") ? "x86-64-v4"
                    : has("avx2")                     ? "x86-64-v3"
                                                      : "x86-64");
    }
    tm = check(jtmb.createTargetMachine(), "target machine");
    builder = jtmb;
    std::vector<std::string> features = jtmb.getFeatures().getFeatures();
    std::sort(features.begin(), features.end());
    environment = std::string("spmd ") + SPMD_VERSION_STRING + " built " + __DATE__ + " " +
                  __TIME__ + "; " + jtmb.getTargetTriple().str() + "; cpu " + jtmb.getCPU() +
                  "; features";
    for (const std::string& f : features) environment += " " + f;
    environment += "; O2, IEEE arithmetic; entry format " + std::to_string(kEntryFormat);
    threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
    jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "LLJIT");
    // libm (expf, tanhf, ...) and the rest of the process resolve generated calls.
    jit->getMainJITDylib().addGenerator(
        check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                  jit->getDataLayout().getGlobalPrefix()),
              "process symbols"));
  }
};

Jit& the_jit() {
  static Jit* j = new Jit();  // never destroyed: kernels may run until exit
  return *j;
}

// An index along one axis, as an affine form a*j + c of the inner loop index j when `affine`
// (c known at compile time when `c` has a value), else any value.
struct Ix {
  Value* v;
  bool affine = false;
  int64_t a = 0;
  std::optional<int64_t> c;
};

// A bounds test: known true/false, or a value (per row or per element).
struct Cond {
  enum State { True, False, Dyn } state;
  Value* v = nullptr;
};

int64_t floor_div(int64_t x, int64_t y) {
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

class Emitter {
 public:
  enum class Mode { Record, Segment, Guarded };

  Emitter(IRBuilder<>& b, llvm::Module& m, const LoopKernel& k, std::vector<Value*> bufs)
      : b_(b), m_(m), k_(k), bufs_(std::move(bufs)) {}

  void start(Mode mode, int64_t segment) {
    mode_ = mode;
    seg_ = segment;
    memo_.clear();
    seeded_node_ = -1;
  }
  const std::vector<int64_t>& breakpoints() const { return breaks_; }

  Ix konst(int64_t c) { return Ix{b_.getInt64(c), true, 0, c}; }
  Ix add(const Ix& x, int64_t k) {
    if (k == 0) return x;
    Ix r{b_.CreateAdd(x.v, b_.getInt64(k)), x.affine, x.a, x.c};
    if (r.c) *r.c += k;
    return r;
  }
  Ix mul(const Ix& x, int64_t m) {
    if (m == 1) return x;
    Ix r{b_.CreateMul(x.v, b_.getInt64(m)), x.affine, x.a * m, x.c};
    if (r.c) *r.c *= m;
    return r;
  }
  Ix sum(const Ix& x, const Ix& y) {
    Ix r{b_.CreateAdd(x.v, y.v), x.affine && y.affine, x.a + y.a, std::nullopt};
    if (x.c && y.c) r.c = *x.c + *y.c;
    return r;
  }

  static std::vector<Value*> memo_key(int node, const std::vector<Ix>& idx) {
    std::vector<Value*> key{reinterpret_cast<Value*>(static_cast<intptr_t>(node))};
    for (auto& i : idx) key.push_back(i.v);
    return key;
  }
  // Node `node` is `v` wherever the epilogue being emitted reads it: the reduction's
  // accumulated value (its epilogue reads it only at the element it computes).
  void seed(int node, Value* v) {
    seeded_node_ = node;
    seeded_ = v;
  }

  Value* emit(int node, const std::vector<Ix>& idx) {
    if (node == seeded_node_) return seeded_;
    std::vector<Value*> key = memo_key(node, idx);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Value* v = compute(k_.nodes[node], idx);
    memo_[key] = v;
    return v;
  }

  // Element type of values (bool as i1) and of storage (bool as i8).
  Type* value_type(DType t) {
    switch (t) {
      case DType::Bool:
        return b_.getInt1Ty();
      case DType::Int32:
      case DType::UInt32:
        return b_.getInt32Ty();
      case DType::Int64:
        return b_.getInt64Ty();
      case DType::Float32:
        return b_.getFloatTy();
      case DType::Float64:
        return b_.getDoubleTy();
      default:
        fail("code generator: dtype ", dtype_name(t), " is not supported");
    }
  }
  Type* storage_type(DType t) { return t == DType::Bool ? b_.getInt8Ty() : value_type(t); }
  // The address of element `index` of a buffer of dtype t (buffers arrive as i8*: typed
  // pointers want the element type's pointer before the GEP).
  Value* element_ptr(DType t, Value* buf, Value* index) {
    Type* et = storage_type(t);
    return b_.CreateGEP(et, b_.CreatePointerCast(buf, et->getPointerTo()), index);
  }

  Value* to_storage(Value* v, DType t) {
    return t == DType::Bool ? b_.CreateZExt(v, b_.getInt8Ty()) : v;
  }
  Value* linear(const std::vector<Ix>& idx, const Shape& shape) {
    Value* off = b_.getInt64(0);
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      off = b_.CreateAdd(off, b_.CreateMul(idx[d].v, b_.getInt64(stride)));
      stride *= shape[d];
    }
    return off;
  }

 private:
  IRBuilder<>& b_;
  llvm::Module& m_;
  const LoopKernel& k_;
  std::vector<Value*> bufs_;
  Mode mode_ = Mode::Guarded;
  int64_t seg_ = 0;
  std::vector<int64_t> breaks_;
  std::map<std::vector<Value*>, Value*> memo_;
  int seeded_node_ = -1;
  Value* seeded_ = nullptr;

  const Node& arg(const Node& n, size_t i) { return k_.nodes[n.args[i]]; }
  std::vector<Ix> operand_index(const Node& operand, const std::vector<Ix>& idx) {
    return operand.shape.empty() ? std::vector<Ix>{} : idx;
  }

  void breakpoint(int64_t j) { breaks_.push_back(j); }

  // lo <= x < hi.
  Cond range(const Ix& x, int64_t lo, int64_t hi) {
    if (x.affine && x.a == 0 && x.c) return {(*x.c >= lo && *x.c < hi) ? Cond::True : Cond::False};
    if (x.affine && x.a != 0 && x.c && mode_ != Mode::Guarded) {
      if (mode_ == Mode::Segment) {
        int64_t at = x.a * seg_ + *x.c;
        return {(at >= lo && at < hi) ? Cond::True : Cond::False};
      }
      // The first j at which a*j + c >= t (a > 0) or at which it drops below t (a < 0).
      int64_t a = x.a, c = *x.c;
      for (int64_t t : {lo, hi})
        breakpoint(a > 0 ? -floor_div(c - t, a) : floor_div(c - t, -a) + 1);
    }
    Value* v = b_.CreateAnd(b_.CreateICmpSGE(x.v, b_.getInt64(lo)),
                            b_.CreateICmpSLT(x.v, b_.getInt64(hi)));
    return {Cond::Dyn, v};
  }
  // x clamped into [lo, hi] (a test decides elsewhere whether the element read is used).
  Ix clamp(const Ix& x, int64_t lo, int64_t hi) {
    Value* v = b_.CreateSelect(b_.CreateICmpSLT(x.v, b_.getInt64(lo)), b_.getInt64(lo), x.v);
    v = b_.CreateSelect(b_.CreateICmpSGT(v, b_.getInt64(hi)), b_.getInt64(hi), v);
    bool uniform = x.affine && x.a == 0;
    return Ix{v, uniform, 0, std::nullopt};
  }
  Cond both(Cond x, Cond y) {
    if (x.state == Cond::False || y.state == Cond::False) return {Cond::False};
    if (x.state == Cond::True) return y;
    if (y.state == Cond::True) return x;
    return {Cond::Dyn, b_.CreateAnd(x.v, y.v)};
  }

  Value* call(const char* name, DType t, std::vector<Value*> args) {
    bool f32 = t == DType::Float32;
    std::string fname = std::string(name) + (f32 ? "f" : "");
    Type* ty = value_type(t);
    std::vector<Type*> params(args.size(), ty);
    auto fn = m_.getOrInsertFunction(fname, llvm::FunctionType::get(ty, params, false));
    return b_.CreateCall(fn, args);
  }
  Value* intrinsic(llvm::Intrinsic::ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }
  Value* fconst(DType t, double v) { return llvm::ConstantFP::get(value_type(t), v); }
  Value* iconst(DType t, int64_t v) { return llvm::ConstantInt::get(value_type(t), v, true); }

  Value* compute(const Node& n, const std::vector<Ix>& idx) {
    switch (n.kind) {
      case NodeKind::Input: {
        Value* ptr = element_ptr(n.dtype, bufs_[n.code],
                                 n.shape.empty() ? b_.getInt64(0) : linear(idx, n.shape));
        Value* v = b_.CreateLoad(storage_type(n.dtype), ptr);
        return n.dtype == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
      }
      case NodeKind::Unary:
        return unary(static_cast<UnaryOp>(n.code), arg(n, 0).dtype, n.dtype,
                     emit(n.args[0], operand_index(arg(n, 0), idx)));
      case NodeKind::Binary:
        return binary(static_cast<BinaryOp>(n.code), arg(n, 0).dtype,
                      emit(n.args[0], operand_index(arg(n, 0), idx)),
                      emit(n.args[1], operand_index(arg(n, 1), idx)));
      case NodeKind::Select:
        return b_.CreateSelect(emit(n.args[0], operand_index(arg(n, 0), idx)),
                               emit(n.args[1], operand_index(arg(n, 1), idx)),
                               emit(n.args[2], operand_index(arg(n, 2), idx)));
      case NodeKind::Convert:
        return convert(arg(n, 0).dtype, n.dtype, emit(n.args[0], operand_index(arg(n, 0), idx)));
      case NodeKind::Broadcast: {
        const Node& x = arg(n, 0);
        std::vector<Ix> in;
        for (size_t i = 0; i < x.shape.size(); ++i)
          in.push_back(x.shape[i] == 1 ? konst(0) : idx[static_cast<size_t>(n.p1[i])]);
        return emit(n.args[0], in);
      }
      case NodeKind::Slice: {
        std::vector<Ix> in;
        for (size_t d = 0; d < idx.size(); ++d) in.push_back(add(mul(idx[d], n.p2[d]), n.p1[d]));
        return emit(n.args[0], in);
      }
      case NodeKind::Rev: {
        std::vector<Ix> in = idx;
        for (int64_t d : n.p1) in[d] = add(mul(idx[d], -1), n.shape[d] - 1);
        return emit(n.args[0], in);
      }
      case NodeKind::Transpose: {
        std::vector<Ix> in(idx.size(), konst(0));
        for (size_t i = 0; i < idx.size(); ++i) in[static_cast<size_t>(n.p1[i])] = idx[i];
        return emit(n.args[0], in);
      }
      case NodeKind::Reshape:
        return reshape(n, idx);
      case NodeKind::Pad:
        return pad(n, idx);
      case NodeKind::Concat:
        return concat(n, idx);
      case NodeKind::Iota: {
        Value* i = idx[static_cast<size_t>(n.code)].v;
        return convert(DType::Int64, n.dtype, i);
      }
      case NodeKind::Reduce:
        break;
    }
    fail("code generator: a reduction can only be a kernel's root");
  }

  Value* reshape(const Node& n, const std::vector<Ix>& idx) {
    const Node& x = arg(n, 0);
    if (x.shape.empty()) return emit(n.args[0], {});
    // Trailing axes the reshape keeps pass their index through; the rest is linearised and
    // split again along the operand's leading axes.
    size_t keep = 0;
    while (keep < idx.size() && keep < x.shape.size() &&
           n.shape[n.shape.size() - 1 - keep] == x.shape[x.shape.size() - 1 - keep])
      ++keep;
    size_t out_lead = idx.size() - keep, in_lead = x.shape.size() - keep;
    std::vector<Ix> in(x.shape.size(), konst(0));
    for (size_t i = 0; i < keep; ++i) in[in_lead + i] = idx[out_lead + i];
    if (in_lead > 0) {
      Ix lin = konst(0);
      int64_t stride = 1;
      for (size_t d = out_lead; d-- > 0;) {
        lin = sum(lin, mul(idx[d], stride));
        stride *= n.shape[d];
      }
      if (in_lead == 1) {
        in[0] = lin;
      } else {
        bool uniform = lin.affine && lin.a == 0;
        Value* rest = lin.v;
        std::optional<int64_t> crest = lin.c;
        for (size_t d = in_lead; d-- > 0;) {
          int64_t size = x.shape[d];
          Ix i{d == 0 ? rest : b_.CreateURem(rest, b_.getInt64(size)), uniform, 0, std::nullopt};
          if (uniform && crest) i.c = d == 0 ? *crest : *crest % size;
          in[d] = i;
          if (d > 0) {
            rest = b_.CreateUDiv(rest, b_.getInt64(size));
            if (crest) *crest /= size;
          }
        }
      }
    }
    return emit(n.args[0], in);
  }

  Value* pad(const Node& n, const std::vector<Ix>& idx) {
    const Node& x = arg(n, 0);
    // An empty operand is never read (a clamped index into it would still be a load).
    if (std::find(x.shape.begin(), x.shape.end(), 0) != x.shape.end()) return emit(n.args[1], {});
    Cond cond{Cond::True};
    std::vector<Ix> in;
    for (size_t d = 0; d < idx.size(); ++d) {
      Ix i = add(idx[d], -n.p1[d]);
      int64_t size = x.shape[d];
      int64_t k = n.p3[d] + 1;
      if (k == 1) {
        Cond c = range(i, 0, size);
        cond = both(cond, c);
        in.push_back(c.state == Cond::Dyn ? clamp(i, 0, size - 1) : i);
        continue;
      }
      if (i.affine && i.a == 0 && i.c) {
        int64_t at = *i.c;
        bool hit = at >= 0 && at % k == 0 && at / k < size;
        cond = both(cond, {hit ? Cond::True : Cond::False});
        in.push_back(konst(hit ? at / k : 0));
        continue;
      }
      Ix nonneg = clamp(i, 0, (size - 1) * k);
      Value* q = b_.CreateUDiv(nonneg.v, b_.getInt64(k));
      Value* on =
          b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSGE(i.v, b_.getInt64(0)),
                                    b_.CreateICmpSLE(i.v, b_.getInt64((size - 1) * k))),
                       b_.CreateICmpEQ(b_.CreateURem(nonneg.v, b_.getInt64(k)), b_.getInt64(0)));
      cond = both(cond, {Cond::Dyn, on});
      in.push_back(Ix{q, nonneg.affine, 0, std::nullopt});
    }
    if (cond.state == Cond::False) return emit(n.args[1], {});
    Value* v = emit(n.args[0], in);
    if (cond.state == Cond::True) return v;
    return b_.CreateSelect(cond.v, v, emit(n.args[1], {}));
  }

  Value* concat(const Node& n, const std::vector<Ix>& idx) {
    size_t axis = static_cast<size_t>(n.code);
    const Ix& x = idx[axis];
    Value* acc = nullptr;
    int64_t off = 0;
    std::vector<std::pair<Cond, Value*>> pieces;
    for (size_t p = 0; p < n.args.size(); ++p) {
      int64_t size = arg(n, p).shape[axis];
      if (size == 0) continue;  // never selected, and never loaded from
      Cond c = range(x, off, off + size);
      if (c.state != Cond::False) {
        std::vector<Ix> in = idx;
        in[axis] = c.state == Cond::True ? add(x, -off) : clamp(add(x, -off), 0, size - 1);
        if (c.state == Cond::True) return emit(n.args[p], in);
        pieces.emplace_back(c, emit(n.args[p], in));
      }
      off += size;
    }
    if (pieces.empty()) fail("code generator: concatenate index out of range");
    acc = pieces.back().second;
    for (size_t p = pieces.size() - 1; p-- > 0;)
      acc = b_.CreateSelect(pieces[p].first.v, pieces[p].second, acc);
    return acc;
  }

  Value* unary(UnaryOp op, DType in, DType out, Value* x) {
    if (op == UnaryOp::IsFinite) {
      if (!is_floating(in)) return b_.getTrue();
      return b_.CreateFCmpOLT(intrinsic(llvm::Intrinsic::fabs, x),
                              fconst(in, std::numeric_limits<double>::infinity()));
    }
    if (in == DType::Bool) return op == UnaryOp::Not ? b_.CreateXor(x, b_.getTrue()) : x;
    if (!is_floating(in)) {
      bool sgn = is_signed_integer(in);
      switch (op) {
        case UnaryOp::Neg:
          return b_.CreateSub(iconst(in, 0), x);
        case UnaryOp::Abs:
          return sgn ? b_.CreateSelect(b_.CreateICmpSLT(x, iconst(in, 0)),
                                       b_.CreateSub(iconst(in, 0), x), x)
                     : x;
        case UnaryOp::Sign: {
          Value* pos = b_.CreateZExt(
              sgn ? b_.CreateICmpSGT(x, iconst(in, 0)) : b_.CreateICmpUGT(x, iconst(in, 0)),
              value_type(in));
          if (!sgn) return pos;
          return b_.CreateSub(pos,
                              b_.CreateZExt(b_.CreateICmpSLT(x, iconst(in, 0)), value_type(in)));
        }
        case UnaryOp::Not:
          return b_.CreateNot(x);
        default:
          return x;
      }
    }
    switch (op) {
      case UnaryOp::Neg:
        return b_.CreateFNeg(x);
      case UnaryOp::Exp:
        return call("exp", in, {x});
      case UnaryOp::Log:
        return call("log", in, {x});
      case UnaryOp::Log1p:
        return call("log1p", in, {x});
      case UnaryOp::Expm1:
        return call("expm1", in, {x});
      case UnaryOp::Sqrt:
        return intrinsic(llvm::Intrinsic::sqrt, x);
      case UnaryOp::Rsqrt:
        return b_.CreateFDiv(fconst(in, 1), intrinsic(llvm::Intrinsic::sqrt, x));
      case UnaryOp::Tanh:
        return in == DType::Float32 ? rational_tanh(x) : call("tanh", in, {x});
      case UnaryOp::Logistic:
        return b_.CreateFDiv(fconst(in, 1),
                             b_.CreateFAdd(fconst(in, 1), call("exp", in, {b_.CreateFNeg(x)})));
      case UnaryOp::Abs:
        return intrinsic(llvm::Intrinsic::fabs, x);
      case UnaryOp::Sign: {
        Value* s = b_.CreateSelect(
            b_.CreateFCmpOGT(x, fconst(in, 0)), fconst(in, 1),
            b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(in, 0)), fconst(in, -1), fconst(in, 0)));
        return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, s);
      }
      case UnaryOp::Sin:
        return call("sin", in, {x});
      case UnaryOp::Cos:
        return call("cos", in, {x});
      case UnaryOp::Floor:
        return intrinsic(llvm::Intrinsic::floor, x);
      case UnaryOp::Ceil:
        return intrinsic(llvm::Intrinsic::ceil, x);
      case UnaryOp::Round:
        return intrinsic(llvm::Intrinsic::nearbyint, x);
      case UnaryOp::Erf:
        return call("erf", in, {x});
      default:
        fail("code generator: unsupported unary op ", static_cast<int>(op));
    }
  }

  // detail::rational_tanh, operation for operation.
  Value* rational_tanh(Value* u) {
    auto f = [&](float v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); };
    Value* x =
        b_.CreateSelect(b_.CreateFCmpOLT(u, f(-detail::kTanhClamp)), f(-detail::kTanhClamp), u);
    x = b_.CreateSelect(b_.CreateFCmpOLT(f(detail::kTanhClamp), x), f(detail::kTanhClamp), x);
    Value* x2 = b_.CreateFMul(x, x);
    Value* p = f(detail::kTanhAlpha[0]);
    auto fma = [&](Value* a, Value* m, float c) {
      return b_.CreateIntrinsic(llvm::Intrinsic::fma, {b_.getFloatTy()}, {a, m, f(c)});
    };
    for (int i = 1; i < 7; ++i) p = fma(p, x2, detail::kTanhAlpha[i]);
    p = b_.CreateFMul(p, x);
    Value* q = f(detail::kTanhBeta[0]);
    for (int i = 1; i < 4; ++i) q = fma(q, x2, detail::kTanhBeta[i]);
    Value* tiny = b_.CreateFCmpOLT(intrinsic(llvm::Intrinsic::fabs, u), f(detail::kTanhTiny));
    Value* r = b_.CreateSelect(tiny, u, b_.CreateFDiv(p, q));
    Value* big = b_.CreateFCmpOGT(intrinsic(llvm::Intrinsic::fabs, u), f(detail::kTanhClamp));
    Value* one = b_.CreateIntrinsic(llvm::Intrinsic::copysign, {b_.getFloatTy()}, {f(1.0f), u});
    return b_.CreateSelect(big, one, r);
  }

  Value* binary(BinaryOp op, DType t, Value* a, Value* c) {
    if (t == DType::Bool) {
      switch (op) {
        case BinaryOp::Add:
        case BinaryOp::Or:
        case BinaryOp::Max:
          return b_.CreateOr(a, c);
        case BinaryOp::Mul:
        case BinaryOp::And:
        case BinaryOp::Min:
          return b_.CreateAnd(a, c);
        case BinaryOp::Xor:
        case BinaryOp::Ne:
          return b_.CreateXor(a, c);
        case BinaryOp::Eq:
          return b_.CreateICmpEQ(a, c);
        case BinaryOp::Lt:
          return b_.CreateAnd(b_.CreateNot(a), c);
        case BinaryOp::Le:
          return b_.CreateOr(b_.CreateNot(a), c);
        case BinaryOp::Gt:
          return b_.CreateAnd(a, b_.CreateNot(c));
        case BinaryOp::Ge:
          return b_.CreateOr(a, b_.CreateNot(c));
        default:
          fail("code generator: unsupported bool op");
      }
    }
    if (is_floating(t)) {
      switch (op) {
        case BinaryOp::Add:
          return b_.CreateFAdd(a, c);
        case BinaryOp::Sub:
          return b_.CreateFSub(a, c);
        case BinaryOp::Mul:
          return b_.CreateFMul(a, c);
        case BinaryOp::Div:
          return b_.CreateFDiv(a, c);
        case BinaryOp::Rem:
          return call("fmod", t, {a, c});
        case BinaryOp::Pow:
          return call("pow", t, {a, c});
        case BinaryOp::Atan2:
          return call("atan2", t, {a, c});
        case BinaryOp::Max:
        case BinaryOp::Min: {
          Value* pick = op == BinaryOp::Max ? b_.CreateFCmpOGT(a, c) : b_.CreateFCmpOLT(a, c);
          Value* nan = b_.CreateFCmpUNO(a, c);
          return b_.CreateSelect(nan, fconst(t, std::numeric_limits<double>::quiet_NaN()),
                                 b_.CreateSelect(pick, a, c));
        }
        case BinaryOp::Eq:
          return b_.CreateFCmpOEQ(a, c);
        case BinaryOp::Ne:
          return b_.CreateFCmpUNE(a, c);
        case BinaryOp::Lt:
          return b_.CreateFCmpOLT(a, c);
        case BinaryOp::Le:
          return b_.CreateFCmpOLE(a, c);
        case BinaryOp::Gt:
          return b_.CreateFCmpOGT(a, c);
        case BinaryOp::Ge:
          return b_.CreateFCmpOGE(a, c);
        default:
          fail("code generator: unsupported float op");
      }
    }
    bool sgn = is_signed_integer(t);
    Value* zero = iconst(t, 0);
    int bits = static_cast<int>(value_type(t)->getIntegerBitWidth());
    switch (op) {
      case BinaryOp::Add:
        return b_.CreateAdd(a, c);
      case BinaryOp::Sub:
        return b_.CreateSub(a, c);
      case BinaryOp::Mul:
        return b_.CreateMul(a, c);
      case BinaryOp::Div:
      case BinaryOp::Rem: {
        Value* is0 = b_.CreateICmpEQ(c, zero);
        Value* neg1 = sgn ? b_.CreateICmpEQ(c, iconst(t, -1)) : b_.getFalse();
        Value* safe = b_.CreateSelect(b_.CreateOr(is0, neg1), iconst(t, 1), c);
        Value* r = op == BinaryOp::Div ? (sgn ? b_.CreateSDiv(a, safe) : b_.CreateUDiv(a, safe))
                                       : (sgn ? b_.CreateSRem(a, safe) : b_.CreateURem(a, safe));
        if (sgn) r = b_.CreateSelect(neg1, op == BinaryOp::Div ? b_.CreateSub(zero, a) : zero, r);
        return b_.CreateSelect(is0, zero, r);
      }
      case BinaryOp::Max:
        return b_.CreateSelect(sgn ? b_.CreateICmpSGT(a, c) : b_.CreateICmpUGT(a, c), a, c);
      case BinaryOp::Min:
        return b_.CreateSelect(sgn ? b_.CreateICmpSLT(a, c) : b_.CreateICmpULT(a, c), a, c);
      case BinaryOp::And:
        return b_.CreateAnd(a, c);
      case BinaryOp::Or:
        return b_.CreateOr(a, c);
      case BinaryOp::Xor:
        return b_.CreateXor(a, c);
      case BinaryOp::ShiftLeft:
      case BinaryOp::ShiftRightLogical: {
        Value* out = b_.CreateICmpUGE(c, iconst(t, bits));  // also catches negative counts
        Value* safe = b_.CreateSelect(out, zero, c);
        Value* r = op == BinaryOp::ShiftLeft ? b_.CreateShl(a, safe) : b_.CreateLShr(a, safe);
        return b_.CreateSelect(out, zero, r);
      }
      case BinaryOp::Eq:
        return b_.CreateICmpEQ(a, c);
      case BinaryOp::Ne:
        return b_.CreateICmpNE(a, c);
      case BinaryOp::Lt:
        return sgn ? b_.CreateICmpSLT(a, c) : b_.CreateICmpULT(a, c);
      case BinaryOp::Le:
        return sgn ? b_.CreateICmpSLE(a, c) : b_.CreateICmpULE(a, c);
      case BinaryOp::Gt:
        return sgn ? b_.CreateICmpSGT(a, c) : b_.CreateICmpUGT(a, c);
      case BinaryOp::Ge:
        return sgn ? b_.CreateICmpSGE(a, c) : b_.CreateICmpUGE(a, c);
      default:
        fail("code generator: unsupported integer op");
    }
  }

 public:
  // convert_value's semantics (backend/cpu/dispatch.h): "!= 0" to bool, saturating float to
  // integer with NaN to 0.
  Value* convert(DType from, DType to, Value* x) {
    if (from == to) return x;
    Type* ty = value_type(to);
    if (to == DType::Bool)
      return is_floating(from) ? b_.CreateFCmpUNE(x, fconst(from, 0))
                               : b_.CreateICmpNE(x, iconst(from, 0));
    if (from == DType::Bool) return is_floating(to) ? b_.CreateUIToFP(x, ty) : b_.CreateZExt(x, ty);
    if (is_floating(from) && is_floating(to)) return b_.CreateFPCast(x, ty);
    if (!is_floating(from) && is_floating(to))
      return is_signed_integer(from) ? b_.CreateSIToFP(x, ty) : b_.CreateUIToFP(x, ty);
    if (!is_floating(from)) return b_.CreateIntCast(x, ty, is_signed_integer(from));
    bool sgn = is_signed_integer(to);
    int bits = static_cast<int>(ty->getIntegerBitWidth());
    llvm::APInt lo = sgn ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits);
    llvm::APInt hi = sgn ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits);
    Value* flo = sgn ? b_.CreateSIToFP(b_.getInt(lo), x->getType())
                     : b_.CreateUIToFP(b_.getInt(lo), x->getType());
    Value* fhi = sgn ? b_.CreateSIToFP(b_.getInt(hi), x->getType())
                     : b_.CreateUIToFP(b_.getInt(hi), x->getType());
    Value* r = sgn ? b_.CreateFPToSI(x, ty) : b_.CreateFPToUI(x, ty);
    r = b_.CreateSelect(b_.CreateFCmpOGE(x, fhi), b_.getInt(hi), r);
    r = b_.CreateSelect(b_.CreateFCmpOLE(x, flo), b_.getInt(lo), r);
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), llvm::ConstantInt::get(ty, 0), r);
  }
};

// for (i = lo; i < hi; ++i) body(i), at the builder's position; leaves it after the loop.
template <class F>
void emit_loop(IRBuilder<>& b, Value* lo, Value* hi, F body, const char* name) {
  Function* fn = b.GetInsertBlock()->getParent();
  auto& ctx = fn->getContext();
  BasicBlock* pre = b.GetInsertBlock();
  BasicBlock* loop = BasicBlock::Create(ctx, name, fn);
  BasicBlock* exit = BasicBlock::Create(ctx, std::string(name) + ".end", fn);
  b.CreateCondBr(b.CreateICmpSLT(lo, hi), loop, exit);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(lo, pre);
  body(i);
  Value* next = b.CreateAdd(i, b.getInt64(1), "", true, true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, hi), loop, exit);
  b.SetInsertPoint(exit);
}

Value* smax(IRBuilder<>& b, Value* x, Value* y) {
  return b.CreateSelect(b.CreateICmpSGT(x, y), x, y);
}
Value* smin(IRBuilder<>& b, Value* x, Value* y) {
  return b.CreateSelect(b.CreateICmpSLT(x, y), x, y);
}

// The reduction's identity in `t`.
Value* identity(Emitter& e, IRBuilder<>& b, prim::ReduceOp op, DType t) {
  Type* ty = e.value_type(t);
  if (op == prim::ReduceOp::And) return b.getTrue();
  if (op == prim::ReduceOp::Or) return b.getFalse();
  if (op == prim::ReduceOp::Sum)
    return is_floating(t) ? llvm::ConstantFP::get(ty, 0.0) : llvm::ConstantInt::get(ty, 0);
  bool max = op == prim::ReduceOp::Max;
  if (is_floating(t)) return llvm::ConstantFP::getInfinity(ty, max);
  int bits = static_cast<int>(ty->getIntegerBitWidth());
  bool sgn = is_signed_integer(t);
  return b.getInt(
      max ? (sgn ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits))
          : (sgn ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits)));
}

Value* combine(IRBuilder<>& b, prim::ReduceOp op, DType t, Value* acc, Value* x) {
  using prim::ReduceOp;
  if (op == ReduceOp::And) return b.CreateAnd(acc, x);
  if (op == ReduceOp::Or) return b.CreateOr(acc, x);
  if (is_floating(t)) {
    if (op == ReduceOp::Sum) {
      auto* r = llvm::cast<llvm::Instruction>(b.CreateFAdd(acc, x));
      llvm::FastMathFlags f;
      f.setAllowReassoc();
      r->setFastMathFlags(f);
      return r;
    }
    // NaN wins, as the interpreter's max/min: x != x picks x; otherwise the larger (smaller).
    Value* pick = op == ReduceOp::Max ? b.CreateFCmpOGT(x, acc) : b.CreateFCmpOLT(x, acc);
    return b.CreateSelect(b.CreateOr(pick, b.CreateFCmpUNO(x, x)), x, acc);
  }
  if (op == ReduceOp::Sum) return b.CreateAdd(acc, x);
  bool sgn = is_signed_integer(t);
  Value* pick = op == ReduceOp::Max ? (sgn ? b.CreateICmpSGT(x, acc) : b.CreateICmpUGT(x, acc))
                                    : (sgn ? b.CreateICmpSLT(x, acc) : b.CreateICmpULT(x, acc));
  return b.CreateSelect(pick, x, acc);
}

// Builds the kernel function `name` into m: a body with one noalias pointer per buffer, and the
// entry point fn(void** buffers, begin, end) that calls it.
void build(const LoopKernel& k, const std::string& name, llvm::Module& m, llvm::TargetMachine& tm) {
  auto& ctx = m.getContext();
  IRBuilder<> b(ctx);
  const int nbuf = k.inputs + 1;
  std::vector<Type*> params(static_cast<size_t>(nbuf), b.getInt8PtrTy());
  params.push_back(b.getInt64Ty());
  params.push_back(b.getInt64Ty());
  Function* body = Function::Create(llvm::FunctionType::get(b.getVoidTy(), params, false),
                                    Function::InternalLinkage, name + ".body", m);
  body->addFnAttr(llvm::Attribute::NoInline);
  for (Function* f : {body}) {
    f->addFnAttr("target-cpu", tm.getTargetCPU());
    f->addFnAttr("target-features", tm.getTargetFeatureString());
    f->addFnAttr(llvm::Attribute::NoUnwind);
  }
  for (int i = 0; i < nbuf; ++i)
    body->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
  BasicBlock* entry = BasicBlock::Create(ctx, "entry", body);
  b.SetInsertPoint(entry);
  std::vector<Value*> bufs;
  auto arg = body->arg_begin();
  for (int i = 0; i < nbuf; ++i) bufs.push_back(&*arg++);
  Value* begin = &*arg++;
  Value* end = &*arg++;
  Emitter e(b, m, k, std::vector<Value*>(bufs.begin(), bufs.end() - 1));
  Value* out = bufs.back();

  // A reduction root iterates over its operand, accumulating `row` elements per output element;
  // otherwise the root's own elements are the iteration space.
  const Node& root = k.root();
  const int root_node = static_cast<int>(k.nodes.size()) - 1;
  const int red = k.reduction();  // the reduction (the root, or under an elementwise epilogue)
  const bool any_reduce = red >= 0;
  const int value_node = any_reduce ? k.nodes[red].args[0] : root_node;
  const Node& rnode = k.nodes[any_reduce ? red : root_node];
  const Shape& operand_shape = k.nodes[value_node].shape;
  int64_t row = 1;
  if (any_reduce)
    for (int64_t a : rnode.p1) row *= operand_shape[static_cast<size_t>(a)];
  const bool reduces = any_reduce && row > kUnrolledRow;  // loops over its rows
  const Shape& space = reduces ? operand_shape : root.shape;
  const DType out_t = rnode.dtype;   // the accumulator's
  const DType store_t = root.dtype;  // the root's
  // The root's value at an index of the space: the value itself, or a short reduction unrolled.
  auto value_at = [&](const std::vector<Ix>& idx) -> Value* {
    if (!any_reduce) return e.emit(value_node, idx);
    auto op = static_cast<prim::ReduceOp>(rnode.code);
    Value* acc = identity(e, b, op, out_t);
    const size_t lead = operand_shape.size() - rnode.p1.size();
    for (int64_t r = 0; r < row; ++r) {
      std::vector<Ix> full = idx;
      full.resize(operand_shape.size(), e.konst(0));
      int64_t rest = r;
      for (size_t d = operand_shape.size(); d-- > lead;) {
        full[d] = e.konst(rest % operand_shape[d]);
        rest /= operand_shape[d];
      }
      acc = combine(b, op, out_t, acc,
                    e.convert(k.nodes[value_node].dtype, out_t, e.emit(value_node, full)));
    }
    e.seed(red, acc);  // the epilogue reads the reduction at this element
    return e.emit(root_node, idx);
  };
  const size_t rank = space.size();
  const int64_t inner = rank ? space.back() : 1;

  // The index of the row holding element `flat` of the iteration space (leading axes).
  auto outer_index = [&](Value* rowv) {
    std::vector<Ix> idx(rank);
    Value* rest = rowv;
    for (size_t d = rank - 1; d-- > 0;) {
      int64_t size = space[d];
      idx[d] = Ix{d == 0 ? rest : b.CreateURem(rest, b.getInt64(size)), true, 0, std::nullopt};
      if (d > 0) rest = b.CreateUDiv(rest, b.getInt64(size));
    }
    return idx;
  };

  // Segments of the inner axis: a dry run of the body records where bounds tests flip.
  std::vector<int64_t> cuts{0, inner};
  Emitter::Mode mode = Emitter::Mode::Guarded;
  if (rank > 0) {
    BasicBlock* scratch = BasicBlock::Create(ctx, "scratch", body);
    b.SetInsertPoint(scratch);
    std::vector<Ix> idx = outer_index(b.getInt64(0));
    idx[rank - 1] = Ix{begin, true, 1, 0};
    e.start(Emitter::Mode::Record, 0);
    if (reduces)
      e.emit(value_node, idx);
    else
      value_at(idx);
    std::vector<int64_t> br = e.breakpoints();
    std::sort(br.begin(), br.end());
    br.erase(std::unique(br.begin(), br.end()), br.end());
    std::vector<int64_t> inside;
    for (int64_t j : br)
      if (j > 0 && j < inner) inside.push_back(j);
    if (inside.size() <= kMaxBreakpoints) {
      mode = Emitter::Mode::Segment;
      cuts = {0};
      cuts.insert(cuts.end(), inside.begin(), inside.end());
      cuts.push_back(inner);
    }
    scratch->dropAllReferences();
    scratch->eraseFromParent();
    b.SetInsertPoint(entry);
  }

  if (!reduces) {
    // Rows [begin / inner, ceil(end / inner)), each clipped to [begin, end).
    Value* row0 = b.CreateSDiv(begin, b.getInt64(inner));
    Value* row1 = b.CreateSDiv(b.CreateAdd(end, b.getInt64(inner - 1)), b.getInt64(inner));
    emit_loop(
        b, row0, row1,
        [&](Value* r) {
          Value* start = b.CreateMul(r, b.getInt64(inner));
          Value* jb = smax(b, b.CreateSub(begin, start), b.getInt64(0));
          Value* je = smin(b, b.CreateSub(end, start), b.getInt64(inner));
          std::vector<Ix> idx = rank ? outer_index(r) : std::vector<Ix>{};
          for (size_t s = 0; s + 1 < cuts.size(); ++s) {
            Value* lo = smax(b, jb, b.getInt64(cuts[s]));
            Value* hi = smin(b, je, b.getInt64(cuts[s + 1]));
            emit_loop(
                b, lo, hi,
                [&](Value* j) {
                  if (rank) idx[rank - 1] = Ix{j, true, 1, 0};
                  e.start(mode, cuts[s]);
                  Value* v = value_at(idx);
                  Value* at = b.CreateAdd(start, j);
                  b.CreateStore(e.to_storage(v, store_t), e.element_ptr(store_t, out, at));
                },
                "j");
          }
        },
        "row");
  } else {
    // Output elements [begin, end): each reduces `row` consecutive elements of the space, which
    // are whole rows of the inner axis (or a part of one row when only the inner axis reduces).
    auto op = static_cast<prim::ReduceOp>(rnode.code);
    emit_loop(
        b, begin, end,
        [&](Value* o) {
          Value* first = b.CreateMul(o, b.getInt64(row));
          Value* rows_per = b.getInt64(std::max<int64_t>(1, row / inner));
          Value* r0 = b.CreateSDiv(first, b.getInt64(inner));
          Value* jb = b.CreateSRem(first, b.getInt64(inner));
          Value* je = b.CreateAdd(jb, b.getInt64(std::min(row, inner)));
          Value* init = identity(e, b, op, out_t);
          // acc lives in memory across the nested loops; mem2reg/SROA lifts it into registers.
          llvm::IRBuilder<> eb(&body->getEntryBlock(), body->getEntryBlock().begin());
          llvm::AllocaInst* acc = eb.CreateAlloca(e.value_type(out_t));
          b.CreateStore(init, acc);
          emit_loop(
              b, r0, b.CreateAdd(r0, rows_per),
              [&](Value* r) {
                std::vector<Ix> idx = rank ? outer_index(r) : std::vector<Ix>{};
                for (size_t s = 0; s + 1 < cuts.size(); ++s) {
                  Value* lo = smax(b, jb, b.getInt64(cuts[s]));
                  Value* hi = smin(b, je, b.getInt64(cuts[s + 1]));
                  // Each segment accumulates in a register chain of its own (a phi the vectoriser
                  // can turn into a vector accumulator).
                  Value* start_acc = b.CreateLoad(e.value_type(out_t), acc);
                  BasicBlock* pre = b.GetInsertBlock();
                  Function* fn = pre->getParent();
                  BasicBlock* loop = BasicBlock::Create(ctx, "acc", fn);
                  BasicBlock* exit = BasicBlock::Create(ctx, "acc.end", fn);
                  b.CreateCondBr(b.CreateICmpSLT(lo, hi), loop, exit);
                  b.SetInsertPoint(loop);
                  llvm::PHINode* j = b.CreatePHI(b.getInt64Ty(), 2);
                  llvm::PHINode* a = b.CreatePHI(e.value_type(out_t), 2);
                  j->addIncoming(lo, pre);
                  a->addIncoming(start_acc, pre);
                  if (rank) idx[rank - 1] = Ix{j, true, 1, 0};
                  e.start(mode, cuts[s]);
                  Value* v = e.convert(k.nodes[value_node].dtype, out_t, e.emit(value_node, idx));
                  Value* na = combine(b, op, out_t, a, v);
                  Value* nj = b.CreateAdd(j, b.getInt64(1), "", true, true);
                  j->addIncoming(nj, b.GetInsertBlock());
                  a->addIncoming(na, b.GetInsertBlock());
                  b.CreateCondBr(b.CreateICmpSLT(nj, hi), loop, exit);
                  b.SetInsertPoint(exit);
                  llvm::PHINode* res = b.CreatePHI(e.value_type(out_t), 2);
                  res->addIncoming(start_acc, pre);
                  res->addIncoming(na, loop);
                  b.CreateStore(res, acc);
                }
              },
              "rows");
          Value* v = b.CreateLoad(e.value_type(out_t), acc);
          // The epilogue (elementwise ops of the reduction) at this output's index.
          std::vector<Ix> out_idx(root.shape.size());
          Value* rest = o;
          for (size_t d = root.shape.size(); d-- > 0;) {
            out_idx[d] = Ix{d == 0 ? rest : b.CreateURem(rest, b.getInt64(root.shape[d])), true, 0,
                            std::nullopt};
            if (d > 0) rest = b.CreateUDiv(rest, b.getInt64(root.shape[d]));
          }
          e.start(Emitter::Mode::Guarded, 0);
          e.seed(red, v);
          v = e.emit(root_node, out_idx);
          b.CreateStore(e.to_storage(v, store_t), e.element_ptr(store_t, out, o));
        },
        "out");
  }
  b.CreateRetVoid();

  // The entry point: unpacks the buffer array.
  Function* fn = Function::Create(
      llvm::FunctionType::get(
          b.getVoidTy(), {b.getInt8PtrTy()->getPointerTo(), b.getInt64Ty(), b.getInt64Ty()}, false),
      Function::ExternalLinkage, name, m);
  fn->addFnAttr("target-cpu", tm.getTargetCPU());
  fn->addFnAttr("target-features", tm.getTargetFeatureString());
  b.SetInsertPoint(BasicBlock::Create(ctx, "entry", fn));
  std::vector<Value*> call_args;
  auto fa = fn->arg_begin();
  Value* array = &*fa++;
  for (int i = 0; i < nbuf; ++i)
    call_args.push_back(
        b.CreateLoad(b.getInt8PtrTy(), b.CreateConstGEP1_64(b.getInt8PtrTy(), array, i)));
  call_args.push_back(&*fa++);
  call_args.push_back(&*fa++);
  b.CreateCall(body, call_args);
  b.CreateRetVoid();
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);
}

// A kernel whose nodes are all elementwise over the root's shape (scalars broadcast) reads and
// writes element i at flat index i: its code does not depend on the shape. Such kernels are
// compiled as one row of kFlatExtent elements (the loop runs over [begin, end) of it), so one
// function serves every shape: a training step's parameter updates (one per weight and bias,
// each its own shape) compile once instead of once per parameter. LLVM spends ~15-25 ms on
// each kernel however small, so this halves the first call of a training step.
constexpr int64_t kFlatExtent = int64_t{1} << 62;  // begin + extent - 1 must not overflow

LoopKernel shape_free(const LoopKernel& k) {
  for (const Node& n : k.nodes) {
    bool elementwise = n.kind == NodeKind::Input || n.kind == NodeKind::Unary ||
                       n.kind == NodeKind::Binary || n.kind == NodeKind::Select ||
                       n.kind == NodeKind::Convert;
    if (!elementwise || (!n.shape.empty() && n.shape != k.root().shape)) return k;
  }
  if (k.root().shape.empty()) return k;
  LoopKernel flat = k;
  for (Node& n : flat.nodes)
    if (!n.shape.empty()) n.shape = Shape{kFlatExtent};
  return flat;
}

// SPMD_CODEGEN_TIMING=1 prints each compilation's time to stderr.
bool timing() {
  static const bool on = [] {
    const char* v = std::getenv("SPMD_CODEGEN_TIMING");
    return v && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

std::vector<std::shared_ptr<const Compiled>> compile(const std::vector<LoopKernel>& kernels,
                                                     bool keep_ir) {
  Jit& jit = the_jit();
  std::lock_guard<std::mutex> lock(jit.mu);
  auto t_start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<const Compiled>> result(kernels.size());
  std::vector<std::string> keys(kernels.size());
  std::map<std::string, std::vector<size_t>> users;  // key -> the kernels it serves
  std::map<std::string, LoopKernel> generic;         // key -> what is compiled for it
  for (size_t i = 0; i < kernels.size(); ++i) {
    LoopKernel g = shape_free(kernels[i]);
    keys[i] = g.key();
    auto it = jit.cache.find(keys[i]);
    if (it != jit.cache.end() && (!keep_ir || !it->second->ir.empty())) {
      result[i] = it->second;
      continue;
    }
    users[keys[i]].push_back(i);
    generic.emplace(keys[i], std::move(g));
  }
  if (users.empty()) return result;

  // With the persistent cache (spmd/compilation_cache.h), each kernel is its own module and
  // object, its function named by its digest, so another process can load it alone; the objects
  // found there are linked as they are. compiled_text's IR is never cached: it compiles.
  const bool persistent = !keep_ir && object_cache_on();
  std::map<std::string, std::string> name_of;  // key -> function name
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
  std::vector<std::string> missing;  // keys to compile
  std::set<std::string> refused;     // entries there but not loadable: compiled, not re-read
  std::optional<ObjectCacheLock> cache_lock;
  auto load_cached = [&](const std::string& key) {
    bool bad = false;
    std::optional<std::string> object = load_object(jit.environment, key, &bad);
    if (bad) refused.insert(key);
    if (!object) return false;
    objects.push_back(llvm::MemoryBuffer::getMemBufferCopy(*object, "spmd_cached_loop"));
    return true;
  };
  for (auto& [key, _] : users) {
    name_of[key] = persistent ? jit.cached_name(key) : "spmd_loop" + std::to_string(jit.functions++);
    if (!persistent || !load_cached(key)) missing.push_back(key);
  }
  if (persistent && !missing.empty()) {
    // Another process may be compiling these now: wait for it, then look again (except for
    // refused entries, which this process rewrites, one writer at a time).
    cache_lock.emplace();
    std::vector<std::string> still;
    for (const std::string& key : missing)
      if (refused.count(key) || !load_cached(key)) still.push_back(key);
    missing = std::move(still);
  }
  count_loaded(static_cast<int64_t>(users.size() - missing.size()));
  count_compiled(static_cast<int64_t>(missing.size()));

  // The kernels to compile, spread over modules (one per compile thread, or one per kernel for
  // the persistent cache): they are optimised and turned into machine code in parallel (a
  // training step's first call waits for them).
  const size_t parts = persistent ? missing.size()
                                  : std::max<size_t>(1, std::min<size_t>(jit.threads, missing.size()));
  struct Part {
    std::unique_ptr<llvm::LLVMContext> ctx;
    std::unique_ptr<llvm::Module> m;
    std::vector<std::string> names, keys;
    std::map<std::string, std::string> ir;
    std::unique_ptr<llvm::MemoryBuffer> object;
  };
  std::vector<Part> part(missing.empty() ? 0 : parts);
  for (Part& pt : part) {
    pt.ctx = std::make_unique<llvm::LLVMContext>();
    pt.m = std::make_unique<llvm::Module>("spmd", *pt.ctx);
    pt.m->setDataLayout(jit.jit->getDataLayout());
    pt.m->setTargetTriple(jit.tm->getTargetTriple().str());
  }
  for (size_t j = 0; j < missing.size(); ++j) {
    Part& pt = part[j % parts];
    build(generic.at(missing[j]), name_of[missing[j]], *pt.m, *jit.tm);
    pt.names.push_back(name_of[missing[j]]);
    pt.keys.push_back(missing[j]);
  }
  auto t_built = std::chrono::steady_clock::now();
  std::vector<std::string> errors(part.size());
  auto optimise_part = [&](size_t k) {
    Part& pt = part[k];
    std::string err;
    llvm::raw_string_ostream es(err);
    if (llvm::verifyModule(*pt.m, &es)) {
      errors[k] = "code generator produced invalid IR: " + es.str();
      return;
    }
    auto tm = jit.builder->createTargetMachine();  // one per thread: they are not shared
    if (!tm) {
      errors[k] = llvm::toString(tm.takeError());
      return;
    }
    optimize(*pt.m, **tm);
    // Machine code here too, on this thread's TargetMachine: ORC only links the object.
    llvm::SmallVector<char, 0> code;
    {
      llvm::raw_svector_ostream os(code);
      llvm::legacy::PassManager pm;
      if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
        errors[k] = "the target cannot emit object code";
        return;
      }
      pm.run(*pt.m);
    }
    pt.object = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(code.data(), code.size()),
                                                     "spmd_loops");
    if (persistent) store_object(jit.environment, pt.keys.front(), pt.object->getBuffer().str());
    if (keep_ir)
      for (const std::string& name : pt.names) {
        std::string text;
        llvm::raw_string_ostream os(text);
        if (Function* f = pt.m->getFunction(name + ".body")) f->print(os);
        pt.ir[name] = os.str();
      }
  };
  {
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t k; (k = next++) < part.size();) optimise_part(k);
    };
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < std::min<size_t>(jit.threads, part.size()); ++t)
      helpers.emplace_back(worker);
    worker();
    for (auto& t : helpers) t.join();
  }
  cache_lock.reset();
  for (const std::string& e : errors)
    if (!e.empty()) fail(e);
  auto t_optimized = std::chrono::steady_clock::now();
  llvm::orc::SymbolLookupSet wanted;
  for (auto& [key, name] : name_of) wanted.add(jit.jit->mangleAndIntern(name));
  for (Part& pt : part) objects.push_back(std::move(pt.object));
  for (auto& object : objects)
    if (auto e = jit.jit->addObjectFile(std::move(object)))
      fail("code generator: ", llvm::toString(std::move(e)));
  auto& es = jit.jit->getExecutionSession();
  auto symbols = check(
      es.lookup(llvm::orc::makeJITDylibSearchOrder(&jit.jit->getMainJITDylib()), std::move(wanted)),
      "symbol lookup");
  if (timing()) {
    auto ms = [](auto a, auto b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    auto t_done = std::chrono::steady_clock::now();
    std::fprintf(stderr,
                 "spmd codegen: %zu kernels (%zu from the compilation cache) in %zu modules: IR "
                 "%.1f ms, optimisation and machine code %.1f ms, linking %.1f ms\n",
                 users.size(), users.size() - missing.size(), part.size(), ms(t_start, t_built),
                 ms(t_built, t_optimized), ms(t_optimized, t_done));
  }
  for (auto& [key, served] : users) {
    const std::string& name = name_of[key];
    auto c = std::make_shared<Compiled>();
    c->fn = reinterpret_cast<KernelFn>(symbols[jit.jit->mangleAndIntern(name)].getAddress());
    for (Part& pt : part)
      if (pt.ir.count(name)) c->ir = pt.ir[name];
    for (size_t i : served) result[i] = c;
    jit.cache[key] = c;
  }
  return result;
}

}  // namespace spmd::codegen
