#pragma once
// Collectives over named axes, as jax.lax's: they work under pmap (real communication between
// devices) and under vmap (batching rules), and take one axis name or a tuple of names for
// nested maps. Calling one outside any map binding the name throws "unbound axis name: <name>".
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "spmd/array.h"

namespace spmd {

// One axis name or several (row-major order for axis_index).
class AxisName {
 public:
  AxisName(const char* name) : names_{name} {}
  AxisName(std::string name) : names_{std::move(name)} {}
  AxisName(std::initializer_list<std::string> names) : names_(names) {}
  AxisName(std::vector<std::string> names) : names_(std::move(names)) {}
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
};

// axis_index_groups, as jax.lax's: groups of indices along one axis name that partition it, all
// of one size (e.g. {{0, 1}, {2, 3}}); each replica then reduces or gathers within its group
// only. Empty: the whole axis.
using AxisIndexGroups = std::vector<std::vector<int>>;

Array psum(const Array& x, const AxisName& axis,
           const AxisIndexGroups& axis_index_groups = {});  // bool sums as int32
Array pmean(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups = {});
Array pmax(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups = {});
Array pmin(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups = {});
// Stacks every replica's x on a new axis `axis` (tiled: concatenates along it); with groups,
// the members of this replica's group, in the order the group lists them.
Array all_gather(const Array& x, const AxisName& axis_name, int axis = 0, bool tiled = false,
                 const AxisIndexGroups& axis_index_groups = {});
// Replica i gets slice i (along scatter_dimension) of psum(x); tiled keeps the dimension.
Array psum_scatter(const Array& x, const AxisName& axis_name, int scatter_dimension = 0,
                   bool tiled = false);
// Splits split_axis into axis_size pieces, sends piece j to replica j, and places the pieces
// received along concat_axis (untiled: split_axis must have the axis size and is replaced by a
// new axis at concat_axis; tiled: pieces are concatenated).
Array all_to_all(const Array& x, const AxisName& axis_name, int split_axis, int concat_axis,
                 bool tiled = false);
// (source, destination) pairs; a replica that is no destination gets zeros.
Array ppermute(const Array& x, const AxisName& axis_name,
               const std::vector<std::pair<int, int>>& perm);
// out[i] = x of replica perm[i]; perm must be a permutation.
Array pshuffle(const Array& x, const AxisName& axis_name, const std::vector<int>& perm);
// This replica's index along the axis (int32; a tuple of names gives the row-major index).
Array axis_index(const AxisName& axis_name);
int64_t axis_size(const AxisName& axis_name);

// Collectives made of the ones above (transforms/collective_composites.cpp), so they work
// wherever those do: under vmap, grad, pmap, shard_map and across processes.
//
// JAX's lax.pbroadcast: every replica gets replica `source`'s x (a psum of x masked to the
// source; its gradient is that psum's).
Array pbroadcast(const Array& x, const AxisName& axis_name, int source);
// JAX's all_gather_invariant: all_gather whose result is the same on every replica, so its
// cotangent is too and transposes to this replica's slice of it (all_gather's transposes to a
// psum_scatter of the replicas' cotangents).
Array all_gather_invariant(const Array& x, const AxisName& axis_name, int axis = 0,
                           bool tiled = false);
// JAX's lax.ragged_all_to_all (mixture-of-experts routing): with N = len(input_offsets), a
// multiple of the axis size A, this replica sends rows [input_offsets[i], + send_sizes[i]) of
// operand to replica i / (N / A), which writes them at rows [output_offsets[i], + the same) of
// its `output`; recv_sizes[i] is the size of the slice this replica receives as its i-th (from
// replica i / (N / A)). Rows of output nobody writes keep their values. Offsets and sizes are
// int32 vectors of length N; operand and output share their dtype and trailing dimensions. Each
// slice travels padded to operand's leading size (an all_to_all of N such slices).
Array ragged_all_to_all(const Array& operand, const Array& output, const Array& input_offsets,
                        const Array& send_sizes, const Array& output_offsets,
                        const Array& recv_sizes, const AxisName& axis_name);
// JAX's lax.psend / lax.precv: point-to-point inside a program, by (source, destination) pairs
// as ppermute's. psend returns the token precv takes; here the token carries the message (a
// ppermute of x), so a precv is paired with its psend by the value passed, and the order of
// sends and receives is the program's data flow. precv checks that the token has out_shape and
// dtype, and with the same pairs gives each destination the source's x (zeros elsewhere).
Array psend(const Array& x, const AxisName& axis_name,
            const std::vector<std::pair<int, int>>& perm);
Array precv(const Array& token, const Shape& out_shape, DType dtype, const AxisName& axis_name,
            const std::vector<std::pair<int, int>>& perm);

}  // namespace spmd
