// The GPU we run on and the limits every step is measured against. Limits are measured, not
// quoted: the copy bandwidth comes from a device-to-device copy in the same run.
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/stats.hpp"

namespace kl {

struct DeviceInfo {
  std::string name;
  int sms = 0, cc_major = 0, cc_minor = 0;
  int sm_clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
  std::size_t l2_bytes = 0, global_bytes = 0, smem_per_block_optin = 0;

  // FP32 peak: every SM retires fp32_lanes_per_sm() FMAs (2 FLOPs each) per clock.
  double peak_fp32_tflops() const {
    return sms * fp32_lanes_per_sm(cc_major, cc_minor) * 2.0 * sm_clock_khz * 1e3 / 1e12;
  }

  // FP32 lanes per SM (CUDA Programming Guide, throughput of 32-bit floating-point add, multiply,
  // multiply-add): 64 on sm_7x (Volta, Turing) and sm_80 (A100), 128 on sm_86 and later (Ampere
  // consumer, Ada, Hopper, Blackwell).
  static int fp32_lanes_per_sm(int major, int minor) { return major < 8 || (major == 8 && minor == 0) ? 64 : 128; }
};

// KL_SANITIZE=1: the tests run under compute-sanitizer (10-100x slower), so they keep their sizes small.
inline bool sanitizing() { return std::getenv("KL_SANITIZE") != nullptr; }

// Throws NoDevice (exit 77) when there is no usable GPU.
inline DeviceInfo device_info() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    throw NoDevice(std::string("no CUDA device (") + (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
                   "): nothing can run or be timed here");
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  DeviceInfo d;
  d.name = p.name;
  d.sms = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = p.l2CacheSize;
  d.global_bytes = p.totalGlobalMem;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&d.bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  return d;
}

// The SM count, cached: launchers size persistent grids with it.
inline int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

// Refuses (exit 2) a problem whose buffers would not fit in free device memory, before any
// allocation fails half-way.
inline void ensure_fits(double bytes, const std::string& what) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (bytes > 0.9 * static_cast<double>(free_b)) {
    throw UsageError(what + " needs " + std::to_string(static_cast<long long>(bytes / (1 << 20))) +
                     " MiB of device memory but only " + std::to_string(free_b >> 20) + " MiB are free");
  }
}

// Median milliseconds of op() (work on the default stream, CUDA events around it) over `reps`
// runs, after `warmups` untimed ones: an idle GPU needs a few milliseconds of work to reach its
// full clocks. How the lessons measure their limits.
template <class Op>
double median_ms(int warmups, int reps, Op&& op) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int r = -warmups; r < reps; ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    op();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (r >= 0) ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return summarize(ms).median;
}

// Device-to-device copy of 2 x 512 MiB, median of 20 after 10 warm-up copies: bytes read + bytes
// written per second. This is the bandwidth floor's denominator for every memory-bound step.
inline double measure_copy_gbps(int reps = 20) {
  const std::size_t bytes = std::size_t{512} << 20;
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemset(src.data(), 1, bytes));
  const double ms = median_ms(
      10, reps, [&] { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); });
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

}  // namespace kl
