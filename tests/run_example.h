#pragma once
// Runs a built example (SPMD_EXAMPLES_DIR/<name> <args>) and captures what it prints.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace spmd::test_util {

struct Finished {
  std::string output;  // stdout and stderr
  int exit_code = -1;  // -1: not built, not started, or killed by a signal
};

inline Finished run_example(const std::string& name, const std::string& args = "") {
  std::string binary = std::string(SPMD_EXAMPLES_DIR) + "/" + name;
  Finished r;
  if (access(binary.c_str(), X_OK) != 0) {
    r.output = "the example is not built: " + binary;
    return r;
  }
  FILE* pipe = popen((binary + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace spmd::test_util
