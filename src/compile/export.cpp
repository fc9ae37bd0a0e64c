// Exported functions (spmd/export.h): a Program written as CBOR and read back, checked equation
// by equation. Each primitive is written as its key() -- the parameters that make its typed
// identity (spmd/primitive.h) -- field by field, and read back by making the primitive and
// assigning those fields, or through its constructor where it derives state from them (control
// flow, pmap). A primitive type missing from the table below, or a key field of a type the
// codec does not know, does not compile: a new primitive must say how it is exported.
#include <nlohmann/json.hpp>

#include <functional>
#include <limits>
#include <mutex>
#include <typeindex>
#include <unordered_map>

#include "codegen/object_cache.h"
#include "compile/export_format.h"
#include "core/array_impl.h"
#include "ir/trace.h"
#include "primitives/callback.h"
#include "primitives/collectives.h"
#include "primitives/control_flow.h"
#include "primitives/custom_call.h"
#include "primitives/pmap_call.h"
#include "primitives/primitives.h"
#include "primitives/remat.h"
#include "spmd/error.h"
#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/topology.h"

namespace spmd {

using json = nlohmann::json;

namespace compile {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'M', 'D', 'E', 'X', 'P', '\n'};
// Nesting of control-flow bodies a file may hold (a hostile file cannot exhaust the stack).
constexpr int kMaxDepth = 48;

[[noreturn]] void corrupt(const std::string& why) {
  fail("deserialize: the exported function is corrupted: ", why);
}

// ---- enums: each with its last value, so a number read is checked before it is cast -----------
template <class E>
struct EnumLast;
template <> struct EnumLast<prim::UnaryOp> { static constexpr auto value = prim::UnaryOp::Conj; };
template <> struct EnumLast<prim::BinaryOp> { static constexpr auto value = prim::BinaryOp::Complex; };
template <> struct EnumLast<ReduceOp> { static constexpr auto value = ReduceOp::Or; };
template <> struct EnumLast<prim::ScatterOp> { static constexpr auto value = prim::ScatterOp::Max; };
template <> struct EnumLast<prim::WindowOp> { static constexpr auto value = prim::WindowOp::Min; };
template <> struct EnumLast<DType> { static constexpr auto value = DType::Complex128; };
template <> struct EnumLast<lax::FftType> { static constexpr auto value = lax::FftType::IRFFT; };
template <> struct EnumLast<AxisType> { static constexpr auto value = AxisType::Manual; };

template <class T>
concept Keyed = requires(const T& t) { t.key(); };
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsPair : std::false_type {};
template <class A, class B>
struct IsPair<std::pair<A, B>> : std::true_type {};

json encode_program(const Program& p);
std::shared_ptr<const Program> decode_program(const json& j, int depth);
template <class Tuple>
void dec_key(const json& j, Tuple key, int depth);

// ---- one key field --------------------------------------------------------------------------
template <class T>
json enc(const T& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_arithmetic_v<T> || std::is_same_v<T, std::string>)
    return v;
  else if constexpr (std::is_enum_v<T>)
    return static_cast<int64_t>(v);
  else if constexpr (std::is_same_v<T, std::shared_ptr<const Program>>)
    return encode_program(*v);
  else if constexpr (IsPair<T>::value)
    return json::array({enc(v.first), enc(v.second)});
  else if constexpr (IsVector<T>::value) {
    json a = json::array();
    for (const auto& e : v) a.push_back(enc(e));
    return a;
  } else if constexpr (Keyed<T>) {
    json a = json::array();
    std::apply([&](const auto&... f) { (a.push_back(enc(f)), ...); }, v.key());
    return a;
  } else {
    static_assert(sizeof(T) == 0, "a key field of this type cannot be exported");
  }
}

template <class T>
void dec(const json& j, T& out, int depth) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) corrupt("expected a boolean, got " + j.dump());
    out = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) corrupt("expected an integer, got " + j.dump());
    if (j.is_number_unsigned() &&
        j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      corrupt("an integer out of range");
    const int64_t v = j.get<int64_t>();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
      corrupt("the integer " + std::to_string(v) + " is out of its field's range");
    out = static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) corrupt("expected a number, got " + j.dump());
    out = j.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) corrupt("expected a string, got " + j.dump());
    out = j.get<std::string>();
  } else if constexpr (std::is_enum_v<T>) {
    int64_t v = 0;
    dec(j, v, depth);
    if (v < 0 || v > static_cast<int64_t>(EnumLast<T>::value))
      corrupt("the value " + std::to_string(v) + " names no member of an enumeration");
    out = static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, std::shared_ptr<const Program>>) {
    out = decode_program(j, depth + 1);
  } else if constexpr (IsPair<T>::value) {
    if (!j.is_array() || j.size() != 2) corrupt("expected a pair, got " + j.dump());
    dec(j[0], out.first, depth);
    dec(j[1], out.second, depth);
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) corrupt("expected an array, got " + j.dump());
    out.clear();
    out.resize(j.size());
    for (size_t i = 0; i < j.size(); ++i) dec(j[i], out[i], depth);
  } else if constexpr (Keyed<T>) {
    dec_key(j, out.key(), depth);
  } else {
    static_assert(sizeof(T) == 0, "a key field of this type cannot be exported");
  }
}

// Assigns a key's fields (references to an object's members, made by this codec, never a
// shared one) from the array `j`.
template <class Tuple>
void dec_key(const json& j, Tuple key, int depth) {
  constexpr size_t n = std::tuple_size_v<Tuple>;
  if (!j.is_array() || j.size() != n)
    corrupt("expected " + std::to_string(n) + " parameters, got " + j.dump());
  [&]<size_t... I>(std::index_sequence<I...>) {
    (dec(j[I], const_cast<std::remove_cvref_t<std::tuple_element_t<I, Tuple>>&>(std::get<I>(key)),
         depth),
     ...);
  }(std::make_index_sequence<n>{});
}

// ---- primitives -----------------------------------------------------------------------------
struct Codec {
  std::string tag;
  std::function<json(const Primitive&)> encode;
  std::function<PrimitivePtr(const json&, int depth)> decode;
};

struct Registry {
  std::unordered_map<std::type_index, Codec> by_type;
  std::unordered_map<std::string, Codec> by_tag;
  void add(std::type_index t, Codec c) {
    by_tag[c.tag] = c;
    by_type[t] = std::move(c);
  }
};

// A primitive read back by assigning its key's fields to one `blank()` makes.
template <class Self, class Blank>
void keyed(Registry& r, const char* tag, Blank blank) {
  r.add(typeid(Self),
        Codec{tag, [](const Primitive& p) { return enc(static_cast<const Self&>(p)); },
              [blank](const json& j, int depth) -> PrimitivePtr {
                std::shared_ptr<Self> s = blank();
                dec_key(j, s->key(), depth);
                return s;
              }});
}

// A call of a body that runs as it is (custom_vjp, custom_jvp, checkpoint: their primal).
PrimitivePtr primal_call(const Primitive& p) {
  auto bodies = p.subprograms();
  if (bodies.empty()) fail("export: ", p.name(), " has no body to export");
  return std::make_shared<prim::Call>(bodies[0]);
}

const Registry& registry() {
  static const Registry r = [] {
    using namespace prim;
    Registry r;
    keyed<Unary>(r, "unary", [] { return std::make_shared<Unary>(UnaryOp::Neg); });
    keyed<Binary>(r, "binary", [] { return std::make_shared<Binary>(BinaryOp::Add); });
    keyed<Select>(r, "select", [] { return std::make_shared<Select>(); });
    keyed<Convert>(r, "convert", [] { return std::make_shared<Convert>(DType::Float32, false); });
    keyed<StopGradient>(r, "stop_gradient", [] { return std::make_shared<StopGradient>(); });
    keyed<Check>(r, "check", [] { return std::make_shared<Check>(""); });
    keyed<Reduce>(r, "reduce", [] { return std::make_shared<Reduce>(ReduceOp::Sum, std::vector<int>{}); });
    keyed<ArgReduce>(r, "argreduce", [] { return std::make_shared<ArgReduce>(true, 0, DType::Int32); });
    keyed<CumSum>(r, "cumsum", [] { return std::make_shared<CumSum>(0, false); });
    keyed<Fft>(r, "fft", [] { return std::make_shared<Fft>(lax::FftType::FFT, std::vector<int64_t>{}); });
    keyed<BroadcastInDim>(r, "broadcast_in_dim", [] { return std::make_shared<BroadcastInDim>(Shape{}, std::vector<int>{}); });
    keyed<Reshape>(r, "reshape", [] { return std::make_shared<Reshape>(Shape{}); });
    keyed<Transpose>(r, "transpose", [] { return std::make_shared<Transpose>(std::vector<int>{}); });
    keyed<Slice>(r, "slice", [] { return std::make_shared<Slice>(Shape{}, Shape{}, Shape{}); });
    keyed<Rev>(r, "rev", [] { return std::make_shared<Rev>(std::vector<int>{}); });
    keyed<Pad>(r, "pad", [] { return std::make_shared<Pad>(Shape{}, Shape{}, Shape{}); });
    keyed<Concatenate>(r, "concatenate", [] { return std::make_shared<Concatenate>(0); });
    keyed<Gather>(r, "gather", [] { return std::make_shared<Gather>(0, 0); });
    keyed<ScatterAdd>(r, "scatter_add", [] { return std::make_shared<ScatterAdd>(0, 0, Shape{}); });
    keyed<Scatter>(r, "scatter", [] { return std::make_shared<Scatter>(ScatterOp::Set, 0, 0); });
    keyed<DynamicSlice>(r, "dynamic_slice", [] { return std::make_shared<DynamicSlice>(Shape{}); });
    keyed<DynamicUpdateSlice>(r, "dynamic_update_slice", [] { return std::make_shared<DynamicUpdateSlice>(); });
    keyed<Iota>(r, "iota", [] { return std::make_shared<Iota>(Shape{}, DType::Int32, 0); });
    keyed<Argsort>(r, "argsort", [] { return std::make_shared<Argsort>(0); });
    keyed<Cholesky>(r, "cholesky", [] { return std::make_shared<Cholesky>(); });
    keyed<TriangularSolve>(r, "triangular_solve", [] { return std::make_shared<TriangularSolve>(true, true, false, false); });
    keyed<Lu>(r, "lu", [] { return std::make_shared<Lu>(); });
    keyed<Qr>(r, "qr", [] { return std::make_shared<Qr>(false); });
    keyed<Eigh>(r, "eigh", [] { return std::make_shared<Eigh>(); });
    keyed<Svd>(r, "svd", [] { return std::make_shared<Svd>(false, true); });
    keyed<DotGeneral>(r, "dot_general", [] { return std::make_shared<DotGeneral>(DotDims{}); });
    keyed<BatchSumDot>(r, "batch_sum_dot", [] { return std::make_shared<BatchSumDot>(DotDims{}); });
    keyed<ConvGeneralDilated>(r, "conv_general_dilated", [] { return std::make_shared<ConvGeneralDilated>(); });
    keyed<ReduceWindow>(r, "reduce_window", [] { return std::make_shared<ReduceWindow>(WindowOp::Sum, WindowDims{}); });
    keyed<SelectAndScatterAdd>(r, "select_and_scatter_add", [] { return std::make_shared<SelectAndScatterAdd>(true, WindowDims{}); });
    keyed<SelectAndGather>(r, "select_and_gather", [] { return std::make_shared<SelectAndGather>(true, WindowDims{}); });
    keyed<RandomBits>(r, "random_bits", [] { return std::make_shared<RandomBits>(Shape{}); });
    keyed<Threefry>(r, "threefry", [] { return std::make_shared<Threefry>(); });
    // Collectives: named axes, their sizes, the mesh layout and group they run in.
    using Names = std::vector<std::string>;
    using Sizes = std::vector<int64_t>;
    keyed<AllReduce>(r, "all_reduce", [] { return std::make_shared<AllReduce>(ReduceOp::Sum, Names{}, Sizes{}); });
    keyed<AllGather>(r, "all_gather", [] { return std::make_shared<AllGather>(Names{}, Sizes{}); });
    keyed<ReduceScatter>(r, "reduce_scatter", [] { return std::make_shared<ReduceScatter>(Names{}, Sizes{}); });
    keyed<AllToAll>(r, "all_to_all", [] { return std::make_shared<AllToAll>(Names{}, Sizes{}); });
    keyed<Ppermute>(r, "ppermute", [] { return std::make_shared<Ppermute>(Names{}, Sizes{}, std::vector<std::pair<int, int>>{}); });
    keyed<AxisIndex>(r, "axis_index", [] { return std::make_shared<AxisIndex>(Names{}, Sizes{}); });
    // Control flow, through the constructors (they derive state from the bodies).
    auto bodies_of = [](const json& j, int depth, size_t at) {
      std::vector<std::shared_ptr<const Program>> b;
      if (!j.is_array() || j.size() <= at) corrupt("a control-flow primitive without bodies");
      dec(j[at], b, depth);
      return b;
    };
    r.add(typeid(Scan),
          Codec{"scan", [](const Primitive& p) { return enc(static_cast<const Scan&>(p)); },
                [bodies_of](const json& j, int depth) -> PrimitivePtr {
                  auto b = bodies_of(j, depth, 0);
                  if (b.size() != 1 || j.size() != 6) corrupt("a scan has one body and 6 fields");
                  int consts, carry, unroll;
                  int64_t length;
                  bool reverse;
                  dec(j[1], consts, depth), dec(j[2], carry, depth), dec(j[3], length, depth);
                  dec(j[4], reverse, depth), dec(j[5], unroll, depth);
                  return std::make_shared<Scan>(b[0], consts, carry, length, reverse, unroll);
                }});
    r.add(typeid(While),
          Codec{"while", [](const Primitive& p) { return enc(static_cast<const While&>(p)); },
                [bodies_of](const json& j, int depth) -> PrimitivePtr {
                  auto b = bodies_of(j, depth, 0);
                  if (b.size() != 2 || j.size() != 3) corrupt("a while loop has two bodies");
                  int cc, bc;
                  dec(j[1], cc, depth), dec(j[2], bc, depth);
                  return std::make_shared<While>(b[0], b[1], cc, bc);
                }});
    r.add(typeid(Cond),
          Codec{"cond", [](const Primitive& p) { return enc(static_cast<const Cond&>(p)); },
                [bodies_of](const json& j, int depth) -> PrimitivePtr {
                  auto b = bodies_of(j, depth, 0);
                  if (b.empty() || j.size() != 1) corrupt("a cond has its branches only");
                  return std::make_shared<Cond>(b);
                }});
    r.add(typeid(Call),
          Codec{"call", [](const Primitive& p) { return enc(static_cast<const Call&>(p)); },
                [bodies_of](const json& j, int depth) -> PrimitivePtr {
                  auto b = bodies_of(j, depth, 0);
                  if (b.size() != 1 || j.size() != 1) corrupt("a call has one body");
                  return std::make_shared<Call>(b[0]);
                }});
    r.add(typeid(PmapCall),
          Codec{"pmap", [](const Primitive& p) { return enc(static_cast<const PmapCall&>(p)); },
                [](const json& j, int depth) -> PrimitivePtr {
                  if (!j.is_array() || j.size() != 8) corrupt("a pmap has 8 fields");
                  std::shared_ptr<const Program> body;
                  std::string axis;
                  int64_t size, global;
                  std::vector<int> in_axes, out_axes, devices, mesh_devices;
                  dec(j[0], body, depth), dec(j[1], axis, depth), dec(j[2], size, depth);
                  dec(j[3], global, depth), dec(j[4], in_axes, depth), dec(j[5], out_axes, depth);
                  dec(j[6], devices, depth), dec(j[7], mesh_devices, depth);
                  return std::make_shared<PmapCall>(body, axis, size, in_axes, out_axes, devices,
                                                    global, mesh_devices);
                }});
    // A sharding constraint (shard_map puts one on each argument and result, jit over arrays on
    // a mesh on its layouts): its mesh (shape, axis names, device ids, axis types), its spec's
    // entries and its unconstrained dimensions. Read back onto this process group's devices of
    // those ids.
    r.add(typeid(ShardingConstraint),
          Codec{"sharding_constraint",
                [](const Primitive& p) {
                  const auto& c = static_cast<const ShardingConstraint&>(p);
                  const Mesh& m = c.sharding->mesh();
                  std::vector<int> ids;
                  for (const Device& d : m.devices()) ids.push_back(d.id);
                  std::vector<std::vector<std::string>> entries;
                  for (const auto& e : c.sharding->spec().entries()) entries.push_back(e.axes);
                  return json::array({enc(m.shape()), enc(m.axis_names()), enc(ids),
                                      enc(m.axis_types()), enc(entries), enc(c.unconstrained)});
                },
                [](const json& j, int depth) -> PrimitivePtr {
                  if (!j.is_array() || j.size() != 6) corrupt("a sharding constraint has 6 fields");
                  std::vector<int64_t> shape;
                  std::vector<std::string> names;
                  std::vector<int> ids, unconstrained;
                  std::vector<AxisType> types;
                  std::vector<std::vector<std::string>> entries;
                  dec(j[0], shape, depth), dec(j[1], names, depth), dec(j[2], ids, depth);
                  dec(j[3], types, depth), dec(j[4], entries, depth), dec(j[5], unconstrained, depth);
                  const std::vector<Device> all = spmd::devices();
                  std::vector<Device> devs;
                  for (int id : ids) {
                    if (id < 0 || static_cast<size_t>(id) >= all.size())
                      fail("deserialize: the function was exported for a mesh of device ", id,
                           ", which this program does not have (", all.size(), " devices)");
                    devs.push_back(all[static_cast<size_t>(id)]);
                  }
                  std::vector<PartitionSpec::Entry> spec;
                  for (auto& e : entries) spec.emplace_back(MeshAxes(e));
                  Mesh mesh = Mesh(shape, names, devs).with_axis_types(types);
                  return std::make_shared<ShardingConstraint>(
                      std::make_shared<const NamedSharding>(mesh, PartitionSpec(spec)),
                      unconstrained);
                }});
    return r;
  }();
  return r;
}

// What is written for a primitive: [tag, fields]. Custom rules and checkpoints are written as
// a call of their primal body.
json encode_primitive(const Primitive& p) {
  if (dynamic_cast<const prim::CustomVjpCall*>(&p) || dynamic_cast<const prim::CustomJvpCall*>(&p) ||
      dynamic_cast<const prim::Checkpoint*>(&p))
    return encode_primitive(*primal_call(p));
  if (dynamic_cast<const prim::PureCallback*>(&p))
    fail("export: the function calls a host callback (", p.name(),
         "), C++ code of this process that cannot be exported");
  const Registry& r = registry();
  auto it = r.by_type.find(typeid(p));
  if (it == r.by_type.end()) fail("export: the primitive ", p.name(), " cannot be exported");
  return json::array({it->second.tag, it->second.encode(p)});
}

PrimitivePtr decode_primitive(const json& j, int depth) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_string())
    corrupt("expected [primitive, parameters], got " + j.dump().substr(0, 200));
  const Registry& r = registry();
  auto it = r.by_tag.find(j[0].get<std::string>());
  if (it == r.by_tag.end()) corrupt("unknown primitive '" + j[0].get<std::string>() + "'");
  return it->second.decode(j[1], depth);
}

// ---- values and programs --------------------------------------------------------------------
json encode_aval(const AbstractValue& v) {
  return json::array({static_cast<int64_t>(v.dtype), v.shape, v.weak});
}

AbstractValue decode_aval(const json& j) {
  if (!j.is_array() || j.size() < 3) corrupt("expected a type [dtype, shape, weak]");
  AbstractValue v;
  dec(j[0], v.dtype, 0);
  dec(j[1], v.shape, 0);
  dec(j[2], v.weak, 0);
  double elements = 1;
  for (int64_t d : v.shape) {
    if (d < 0) corrupt("a negative dimension in " + v.str());
    elements *= static_cast<double>(d);
  }
  if (elements > static_cast<double>(int64_t{1} << 48)) corrupt("an array too large: " + v.str());
  return v;
}

json encode_atom(const Atom& a) {
  if (!a.is_literal()) return a.var;
  const Array& l = a.literal;
  const auto* p = static_cast<const uint8_t*>(l.data());
  json t = encode_aval(l.aval());
  t.push_back(json::binary(std::vector<uint8_t>(p, p + l.nbytes())));
  return json{{"literal", t}};
}

json encode_program(const Program& p) {
  json types = json::array();
  for (const AbstractValue& v : p.var_types) types.push_back(encode_aval(v));
  json eqs = json::array();
  for (const Equation& e : p.equations) {
    json in = json::array();
    for (const Atom& a : e.inputs) in.push_back(encode_atom(a));
    eqs.push_back(json::array({encode_primitive(*e.primitive), in, e.outputs}));
  }
  json outs = json::array();
  for (const Atom& a : p.outputs) outs.push_back(encode_atom(a));
  return json{{"types", types},   {"inputs", p.inputs},   {"captured", p.num_captured},
              {"outputs", outs}, {"equations", eqs}};
}

const json& field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) corrupt(std::string("a program without '") + name + "'");
  return j.at(name);
}

std::shared_ptr<const Program> decode_program(const json& j, int depth) {
  if (depth > kMaxDepth) corrupt("bodies nested deeper than " + std::to_string(kMaxDepth));
  auto p = std::make_shared<Program>();
  const json& types = field(j, "types");
  if (!types.is_array()) corrupt("'types' is not an array");
  for (const json& t : types) p->var_types.push_back(decode_aval(t));
  const size_t nvars = p->var_types.size();
  std::vector<bool> defined(nvars, false);
  auto var = [&](const json& v, bool define) {
    int id = -1;
    dec(v, id, depth);
    if (id < 0 || static_cast<size_t>(id) >= nvars)
      corrupt("variable " + std::to_string(id) + " of a program of " + std::to_string(nvars));
    if (define == defined[static_cast<size_t>(id)])
      corrupt("variable " + std::to_string(id) + (define ? " is defined twice" : " is used before it is defined"));
    defined[static_cast<size_t>(id)] = true;
    return id;
  };
  auto atom = [&](const json& a) {
    if (!a.is_object()) return Atom::of(var(a, false));
    const json& t = field(a, "literal");
    if (!t.is_array() || t.size() != 4 || !t[3].is_binary()) corrupt("a malformed literal");
    AbstractValue v = decode_aval(t);
    const auto& bytes = t[3].get_binary();
    if (bytes.size() != v.nbytes())
      corrupt("a literal of type " + v.str() + " holds " + std::to_string(bytes.size()) + " bytes");
    Array l(bytes.data(), v.shape, v.dtype);
    l.impl()->aval.weak = v.weak;
    return Atom::of(std::move(l));
  };
  const json& inputs = field(j, "inputs");
  if (!inputs.is_array()) corrupt("'inputs' is not an array");
  for (const json& v : inputs) p->inputs.push_back(var(v, true));
  dec(field(j, "captured"), p->num_captured, depth);
  if (p->num_captured < 0 || static_cast<size_t>(p->num_captured) > p->inputs.size())
    corrupt("more captured inputs than inputs");
  const json& eqs = field(j, "equations");
  if (!eqs.is_array()) corrupt("'equations' is not an array");
  for (size_t k = 0; k < eqs.size(); ++k) {
    const json& e = eqs[k];
    if (!e.is_array() || e.size() != 3 || !e[1].is_array() || !e[2].is_array())
      corrupt("equation " + std::to_string(k) + " is malformed");
    Equation eq;
    eq.primitive = decode_primitive(e[0], depth);
    for (const json& a : e[1]) eq.inputs.push_back(atom(a));
    for (const json& v : e[2]) eq.outputs.push_back(var(v, true));
    // The primitive's type rule must give the types the file states.
    std::vector<AbstractValue> in, out;
    for (const Atom& a : eq.inputs) in.push_back(p->type(a));
    try {
      out = eq.primitive->abstract_eval(in);
    } catch (const std::exception& ex) {
      corrupt("equation " + std::to_string(k) + " (" + eq.primitive->name() + "): " + ex.what());
    }
    if (out.size() != eq.outputs.size())
      corrupt("equation " + std::to_string(k) + " (" + eq.primitive->name() + ") gives " +
              std::to_string(out.size()) + " results, the file " + std::to_string(eq.outputs.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      const AbstractValue& want = p->var_types[static_cast<size_t>(eq.outputs[i])];
      if (out[i].shape != want.shape || out[i].dtype != want.dtype)
        corrupt("equation " + std::to_string(k) + " (" + eq.primitive->name() + ") gives " +
                out[i].str() + " where the file says " + want.str());
    }
    p->equations.push_back(std::move(eq));
  }
  const json& outs = field(j, "outputs");
  if (!outs.is_array()) corrupt("'outputs' is not an array");
  for (const json& a : outs) p->outputs.push_back(atom(a));
  return p;
}

json encode_tree(const TreeDef& t) {
  json c = json::array();
  for (const TreeDef& k : t.children) c.push_back(encode_tree(k));
  return json::array({static_cast<int>(t.kind), c, t.keys, t.type_name});
}

TreeDef decode_tree(const json& j, int depth) {
  if (depth > kMaxDepth) corrupt("a pytree nested deeper than " + std::to_string(kMaxDepth));
  if (!j.is_array() || j.size() != 4 || !j[1].is_array()) corrupt("a malformed pytree");
  TreeDef t;
  int kind = 0;
  dec(j[0], kind, depth);
  if (kind < 0 || kind > static_cast<int>(TreeDef::Kind::Static)) corrupt("a pytree of unknown kind");
  t.kind = static_cast<TreeDef::Kind>(kind);
  for (const json& c : j[1]) t.children.push_back(decode_tree(c, depth + 1));
  dec(j[2], t.keys, depth);
  dec(j[3], t.type_name, depth);
  if ((t.kind == TreeDef::Kind::Map || t.kind == TreeDef::Kind::Struct) &&
      t.keys.size() != t.children.size())
    corrupt("a pytree whose keys do not match its children");
  return t;
}

std::string hex_digest(std::string_view bytes) { return codegen::sha256_hex(std::string(bytes)); }

}  // namespace

std::string seal_export(std::string_view cbor, uint32_t version) {
  std::string out(kMagic, sizeof kMagic);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((version >> (8 * i)) & 0xff));
  out.append(cbor);
  out += hex_digest(out);
  return out;
}

std::string unseal_export(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic + 4 + 64)
    corrupt("it is truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes.substr(0, sizeof kMagic) != std::string_view(kMagic, sizeof kMagic))
    fail("deserialize: not an exported spmd function (its first bytes are not \"SPMDEXP\")");
  uint32_t version = 0;
  for (int i = 0; i < 4; ++i)
    version |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[sizeof kMagic + i])) << (8 * i);
  if (version != kExportVersion)
    fail("deserialize: the function was exported in format version ", version,
         "; this library reads version ", kExportVersion);
  const std::string_view body = bytes.substr(0, bytes.size() - 64);
  if (hex_digest(body) != bytes.substr(bytes.size() - 64))
    corrupt("its checksum does not match its contents (truncated or altered)");
  return std::string(body.substr(sizeof kMagic + 4));
}

}  // namespace compile

// ---- Exported -------------------------------------------------------------------------------
struct Exported::State {
  std::shared_ptr<const Program> program;
  TreeDef in_tree, out_tree;
  std::vector<AbstractValue> in_avals, out_avals;
  // The program run under jit: compiled at the first call, partitioned when the arguments lie
  // on a mesh, as any jitted function.
  mutable std::once_flag made;
  mutable std::function<std::vector<Array>(const std::vector<Array>&)> run;
};

const std::vector<AbstractValue>& Exported::in_avals() const { return state_->in_avals; }
const std::vector<AbstractValue>& Exported::out_avals() const { return state_->out_avals; }
const TreeDef& Exported::in_tree() const { return state_->in_tree; }
const TreeDef& Exported::out_tree() const { return state_->out_tree; }
const Program& Exported::program() const { return *state_->program; }

void Exported::check_tree(const TreeDef& given) const {
  if (!(given == state_->in_tree))
    fail("Function exported with input pytree ", state_->in_tree.str(),
         " was called with input pytree ", given.str());
}

std::vector<Array> Exported::call_flat(const std::vector<Array>& leaves) const {
  const State& s = *state_;
  if (leaves.size() != s.in_avals.size())
    fail("the exported function takes ", s.in_avals.size(), " arrays, got ", leaves.size());
  std::vector<std::string> errors;
  for (size_t i = 0; i < leaves.size(); ++i) {
    AbstractValue got = leaves[i].aval();
    if (got.shape != s.in_avals[i].shape || got.dtype != s.in_avals[i].dtype)
      errors.push_back("Argument " + std::to_string(i) + " exported with " + s.in_avals[i].str() +
                       " and called with " + got.str());
  }
  if (!errors.empty()) {
    std::string msg = "Argument types differ from the types for which this function was exported. The mismatches are:";
    for (const std::string& e : errors) msg += "\n" + e;
    fail(msg);
  }
  std::call_once(s.made, [&] {
    auto program = s.program;
    auto jitted = std::make_shared<Jitted<std::function<std::vector<Array>(const std::vector<Array>&)>>>(
        [program](const std::vector<Array>& xs) { return ir::eval_program(*program, xs); },
        JitOptions{});
    s.run = [jitted](const std::vector<Array>& xs) { return (*jitted)(xs); };
  });
  return s.run(leaves);
}

std::vector<uint8_t> Exported::serialize() const {
  const State& s = *state_;
  json in = json::array(), out = json::array();
  for (const AbstractValue& v : s.in_avals) in.push_back(compile::encode_aval(v));
  for (const AbstractValue& v : s.out_avals) out.push_back(compile::encode_aval(v));
  json doc = {{"avals_in", in},
              {"avals_out", out},
              {"in_tree", compile::encode_tree(s.in_tree)},
              {"out_tree", compile::encode_tree(s.out_tree)},
              {"program", compile::encode_program(*s.program)}};
  std::vector<uint8_t> cbor = json::to_cbor(doc);
  std::string sealed = compile::seal_export(
      std::string_view(reinterpret_cast<const char*>(cbor.data()), cbor.size()));
  return std::vector<uint8_t>(sealed.begin(), sealed.end());
}

namespace detail {

Exported export_program(Program program, TreeDef in_tree, TreeDef out_tree) {
  if (program.num_captured != 0)
    fail("export_: the function reads values traced by an enclosing transformation; export it "
         "outside any transformation");
  auto s = std::make_shared<Exported::State>();
  program.printed_types.clear();
  s->in_avals = program.input_types();
  s->out_avals = program.output_types();
  s->program = std::make_shared<const Program>(std::move(program));
  s->in_tree = std::move(in_tree);
  s->out_tree = std::move(out_tree);
  compile::encode_program(*s->program);  // refuses what cannot be exported now, not when saved
  return Exported(s);
}

}  // namespace detail

Exported deserialize(std::string_view bytes) {
  const std::string cbor = compile::unseal_export(bytes);
  json doc;
  try {
    doc = json::from_cbor(cbor);
  } catch (const json::exception& e) {
    compile::corrupt(std::string("its CBOR does not parse: ") + e.what());
  }
  auto s = std::make_shared<Exported::State>();
  try {
    if (!doc.is_object()) compile::corrupt("its document is not a map");
    s->program = compile::decode_program(compile::field(doc, "program"), 0);
    s->in_tree = compile::decode_tree(compile::field(doc, "in_tree"), 0);
    s->out_tree = compile::decode_tree(compile::field(doc, "out_tree"), 0);
    for (const json& v : compile::field(doc, "avals_in")) s->in_avals.push_back(compile::decode_aval(v));
    for (const json& v : compile::field(doc, "avals_out")) s->out_avals.push_back(compile::decode_aval(v));
  } catch (const json::exception& e) {
    compile::corrupt(e.what());
  }
  const Program& p = *s->program;
  auto same = [](const std::vector<AbstractValue>& a, const std::vector<AbstractValue>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].shape != b[i].shape || a[i].dtype != b[i].dtype) return false;
    return true;
  };
  if (!same(s->in_avals, p.input_types()) || !same(s->out_avals, p.output_types()))
    compile::corrupt("its argument or result types disagree with its program");
  if (s->in_tree.num_leaves() != static_cast<int>(s->in_avals.size()) ||
      s->out_tree.num_leaves() != static_cast<int>(s->out_avals.size()))
    compile::corrupt("its pytrees do not have one leaf per argument and result");
  return Exported(s);
}

}  // namespace spmd
