#pragma once
// Each kernels_*.cpp file registers its kernels; register_all_kernels() calls them all once.
namespace spmd::cpu {

void register_elementwise_kernels();
void register_reduce_kernels();
void register_shape_kernels();
void register_index_kernels();
void register_dot_kernels();
void register_random_kernels();
void register_collective_kernels();
void register_pmap_kernel();
void register_control_flow_kernels();
void register_callback_kernels();
void register_linalg_kernels();
void register_conv_kernels();
void register_complex_kernels();
void register_fft_kernels();

inline void register_all_kernels() {
  register_elementwise_kernels();
  register_reduce_kernels();
  register_shape_kernels();
  register_index_kernels();
  register_dot_kernels();
  register_random_kernels();
  register_collective_kernels();
  register_pmap_kernel();
  register_control_flow_kernels();
  register_callback_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_complex_kernels();
  register_fft_kernels();
}

}  // namespace spmd::cpu
