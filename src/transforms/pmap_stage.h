#pragma once
// pmap's call in two steps, for its ahead-of-time stages (compile/stages.cpp): trace (find or
// make the PmapCall of a signature, run nothing) and run (a PmapCall traced before, on arguments
// of its types). pmap_call is both at once.
#include <memory>

#include "primitives/pmap_call.h"
#include "spmd/transforms.h"

namespace spmd::transforms {

// With trace_only: sets `staged` to the call's PmapCall (found or traced) and returns nothing.
// Otherwise runs the call, with `staged` when it is set (no lookup, no trace; make_fn may then
// be null) and the cache's entry or a new trace otherwise.
std::vector<Array> pmap_impl(detail::PmapCache& cache, const detail::PmapSpec& spec,
                             const detail::FlatFnMaker* make_fn, const detail::FlatCall& call,
                             TreeDef& out_tree, std::shared_ptr<prim::PmapCall>& staged,
                             bool trace_only);

}  // namespace spmd::transforms
