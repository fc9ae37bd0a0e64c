#pragma once
// Steps the linear-algebra ops share with det (transforms/linalg_det.cpp), which is defined with
// a custom JVP and so lives with the transformations.
#include "spmd/ops.h"

namespace spmd::linalg::impl {

// a is a float32/float64 array of rank >= 2 (square when `square`), else an error naming op.
void check_matrices(const Array& a, const char* op, bool square, const char* what = "a");
// The last two axes swapped.
Array mT(const Array& x);
// The determinant from LU: the permutation's sign times the product of U's diagonal.
Array det_from_lu(const Array& a);
// adj(a) = det(a) a⁻¹ for every square a, singular ones included (from the SVD).
Array adjugate(const Array& a);

}  // namespace spmd::linalg::impl
