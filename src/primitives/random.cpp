// Rules of the counter-based random primitives.
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::prim {
namespace {
void check_key(const char* op, const AbstractValue& k) {
  if (k.dtype != DType::UInt32 || k.ndim() < 1 || k.shape.back() != 2)
    fail(op, ": expected a key of type u32[..., 2] (from random::key), got ", k.str());
}
}  // namespace

Params RandomBits::params() const { return {{"shape", tuple_str(shape)}}; }

std::vector<AbstractValue> RandomBits::abstract_eval(const std::vector<AbstractValue>& in) const {
  check_key("random_bits", in.at(0));
  Shape out(in[0].shape.begin(), in[0].shape.end() - 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return {AbstractValue{out, DType::UInt32, false}};
}

Batched RandomBits::batch(const BatchContext&, const std::vector<Array>& in,
                          const std::vector<int>& bd) const {
  return {{bind1(std::make_shared<RandomBits>(shape), {moveaxis(in[0], bd[0], 0)})}, {0}};
}

std::vector<Array> RandomBits::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                   const std::vector<Array>&) const {
  return {Array()};
}

std::vector<AbstractValue> Threefry::abstract_eval(const std::vector<AbstractValue>& in) const {
  check_key("threefry2x32", in.at(0));
  check_key("threefry2x32", in.at(1));
  if (in[0].shape != in[1].shape)
    fail("threefry2x32: expected key and counter of one shape, got ", in[0].str(), " and ",
         in[1].str());
  return {in[0]};
}

Batched Threefry::batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& bd) const {
  return {{bind1(std::make_shared<Threefry>(), batch_all_at_front(in, bd, ctx.axis_size))}, {0}};
}

}  // namespace spmd::prim
