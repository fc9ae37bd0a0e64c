#pragma once
// Host values between the processes of a multi-process run, for the functions that are
// collectives over the processes (multihost_utils, global arrays): every process calls them in
// the same order, on a channel no pmap collective uses.
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/transport.h"

namespace spmd::distributed {

// The channel of these exchanges.
constexpr int kHostChannel = runtime::kChannels - 1;

// Every process's bytes, by process (this process's `mine` among them), sizes first, so a
// process that passes something else is reported instead of misread. Without a transport
// (one process), just this one's.
std::vector<std::vector<char>> all_process_bytes(const void* mine, size_t bytes,
                                                 const std::string& what);

// Throws on every process, naming the first process whose `text` differs from process 0's;
// `what` starts the message and `expected` says what should agree.
void check_same_on_every_process(const std::string& text, const std::string& what,
                                 const std::string& expected);

}  // namespace spmd::distributed
