#pragma once
// The persistent compilation cache: native code that jit's code generator made, kept in a
// directory so that another run, or another process of this host, loads it instead of compiling
// again (JAX's jax_compilation_cache_dir).
//
// What is stored: one entry per fused loop kernel, its machine code as an object file, keyed by
// the kernel's whole description (the code generator's input), the library's version and build,
// the target (triple, CPU, CPU features) and the code generator's options. An entry of another
// version, build or CPU has another key, and its header is checked too: it is never loaded.
// Tracing, simplification and fusion still run on every first call (they take milliseconds);
// LLVM's optimisation and machine code (tens of milliseconds per kernel) are what a hit skips.
//
// Loading object code means running it, so the cache is guarded: the directory is created 0700;
// an entry (or a directory) owned by another user, or writable by group or others, is refused
// with a warning on stderr; every entry carries a SHA-256 of its contents, checked before it is
// loaded (a torn or corrupted entry is refused and compiled again). Writes go to a temporary
// file renamed into place, so a reader sees a whole entry or none; processes that miss at once
// take the directory's lock in turn, so N processes of one host compiling the same program
// compile each kernel once: the first compiles and writes, the others find its entries.
#include <cstdint>
#include <string>

namespace spmd {

// Uses `dir` as the cache directory (created 0700 with its parents when missing); "" turns the
// cache off. Overrides the environment variable SPMD_COMPILATION_CACHE_DIR, which sets it at
// start-up otherwise (unset or empty: no cache).
void set_compilation_cache_dir(const std::string& dir);
// The directory in use ("" when the cache is off).
std::string compilation_cache_dir();

// What this process's code generator did since it started.
struct CompilationCacheStats {
  int64_t kernels_compiled = 0;  // compiled by LLVM
  int64_t kernels_loaded = 0;    // loaded from the persistent cache instead
  int64_t entries_written = 0;   // written to it
  int64_t entries_refused = 0;   // found but not loaded: corrupted, or unsafe to load
};
CompilationCacheStats compilation_cache_stats();

}  // namespace spmd
