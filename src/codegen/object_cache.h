#pragma once
// The persistent compilation cache's store (spmd/compilation_cache.h): entries of object code in
// a directory, guarded and checksummed. The code generator (llvm_compiler.cpp) asks it for a
// kernel's object before compiling one, and gives it what it compiled.
//
// An entry is one file, <digest>.spmdobj, where digest is the SHA-256 of the environment and
// the key (hex). Its layout (integers little-endian):
//   "SPMDOBJ\n"                      magic, 8 bytes
//   u32 format                       kEntryFormat
//   u32 E, E bytes                   the environment (version, build, target, options)
//   u32 K, K bytes                   the key (the kernel's description)
//   u64 N, N bytes                   the object file
//   32 bytes                         SHA-256 of every byte before it
// A reader loads it only when the magic, the format, the environment and the key equal its own
// and the checksum holds; anything else is a miss (compiled again, and the entry rewritten).
#include <cstdint>
#include <optional>
#include <string>

namespace spmd::codegen {

inline constexpr uint32_t kEntryFormat = 1;

// SHA-256 of `data`, as 64 hex digits.
std::string sha256_hex(const std::string& data);
// The entry's id (its file is <id>.spmdobj): 40 hex digits of the SHA-256 of the environment
// and the key.
std::string entry_id(const std::string& environment, const std::string& key);

// The entry's bytes, as laid out above, and back: parse_entry gives the object, or std::nullopt
// with `why` saying what did not match.
std::string encode_entry(const std::string& environment, const std::string& key,
                         const std::string& object);
std::optional<std::string> parse_entry(const std::string& bytes, const std::string& environment,
                                       const std::string& key, std::string& why);

// Whether the cache is on (a directory is set and usable).
bool object_cache_on();
// The object stored for (environment, key), if the cache is on and holds a valid one.
// `refused` (when given) is set when an entry was there but not loaded (it warned): looking
// again cannot find a better one.
std::optional<std::string> load_object(const std::string& environment, const std::string& key,
                                       bool* refused = nullptr);
// Stores it (atomically: a temporary file renamed into place). Failures warn and are ignored.
void store_object(const std::string& environment, const std::string& key,
                  const std::string& object);

// Held while this process compiles kernels it did not find: other processes sharing the
// directory wait for it, then find its entries. Nothing when the cache is off.
class ObjectCacheLock {
 public:
  ObjectCacheLock();
  ~ObjectCacheLock();
  ObjectCacheLock(const ObjectCacheLock&) = delete;
  ObjectCacheLock& operator=(const ObjectCacheLock&) = delete;

 private:
  int fd_ = -1;
};

// The statistics' counters (spmd::compilation_cache_stats).
void count_compiled(int64_t n);
void count_loaded(int64_t n);

}  // namespace spmd::codegen
