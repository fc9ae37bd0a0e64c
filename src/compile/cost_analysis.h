#pragma once
// Compiled::cost_analysis (spmd/transforms.h): what a program computes and moves, counted per
// equation as XLA's HloCostAnalysis counts them, so numbers compare with JAX's:
// - flops: one per element of an elementwise op's result, except transcendental ones (exp, log,
//   tanh, logistic, sqrt, rsqrt, sin, cos, erf, pow, atan2, ...), which count as
//   transcendentals instead; a reduction one per element reduced; dot_general 2 per
//   multiply-add (2 * output elements * contracted size); a convolution 2 per multiply-add;
//   data movement (reshape, transpose, slice, gather, ...) none.
// - bytes_accessed: each equation's operands and results, summed (views such as reshape move
//   nothing); what fusion keeps in registers is still counted, as XLA counts it before fusion.
// - Control flow: a body counted once, as XLA counts a while loop's body (its trip count is
//   not known to the analysis in general).
#include "spmd/program.h"
#include "spmd/transforms.h"

namespace spmd::compile {

CostAnalysis cost_analysis(const Program& program);

}  // namespace spmd::compile
