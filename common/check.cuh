// Error handling shared by every lesson: CUDA calls are checked with CUDA_CHECK, which names the
// call, file and line; user mistakes and a missing GPU are exceptions of their own so that an
// executable can end with one clear line and the exit code a script expects.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kl {

// Bad input from the command line (or an API argument): exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// No usable CUDA device: exit code 77, which ctest and our scripts read as "skipped".
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a launcher whose step cannot run this shape or on this GPU; the driver shows the step as n/a.
struct NotSupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// a * b * ..., refused (UsageError naming `what`) when the product exceeds `limit`.
inline std::int64_t checked_product(const std::vector<std::int64_t>& factors, std::int64_t limit,
                                    const std::string& what) {
  std::int64_t p = 1;
  for (std::int64_t f : factors) {
    if (f > 0 && p > limit / f) throw UsageError(what + " is too large (more than " + std::to_string(limit) + ")");
    p *= f;
  }
  return p;
}

inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                             " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

}  // namespace kl

#define CUDA_CHECK(call) ::kl::cuda_check((call), #call, __FILE__, __LINE__)
// After a <<<launch>>>: catches a bad configuration at once (the kernel itself reports at the next sync).
#define CUDA_CHECK_LAUNCH() ::kl::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
