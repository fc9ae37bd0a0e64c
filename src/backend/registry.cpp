#include <mutex>
#include <unordered_map>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "spmd/error.h"

namespace spmd::backend {
namespace {

std::unordered_map<std::type_index, Kernel>& kernels() {
  static auto* table = new std::unordered_map<std::type_index, Kernel>();
  return *table;
}
std::unordered_map<std::type_index, Kernel>& complex_kernels() {
  static auto* table = new std::unordered_map<std::type_index, Kernel>();
  return *table;
}

void ensure_cpu_kernels() {
  static std::once_flag once;
  std::call_once(once, [] { cpu::register_all_kernels(); });
}

}  // namespace

void register_kernel(std::type_index primitive_type, Kernel k) { kernels()[primitive_type] = k; }

void register_complex_kernel(std::type_index primitive_type, Kernel k) {
  complex_kernels()[primitive_type] = k;
}

Kernel find_complex_kernel(const Primitive& p) {
  ensure_cpu_kernels();
  auto it = complex_kernels().find(std::type_index(typeid(p)));
  return it == complex_kernels().end() ? nullptr : it->second;
}

Kernel find_kernel(const Primitive& p) {
  ensure_cpu_kernels();
  auto it = kernels().find(std::type_index(typeid(p)));
  if (it == kernels().end()) fail("no CPU kernel for primitive '", p.name(), "'");
  return it->second;
}

}  // namespace spmd::backend
