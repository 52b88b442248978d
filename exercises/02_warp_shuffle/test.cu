// Grades exercises 02.1 and 02.2, built twice: exercise02_test grades the files of
// exercises/02_warp_shuffle (or a student's copy), solution02_test the solutions and the wrong
// techniques kept beside them, which must fail. Each exercise is one __device__ function, called
// here in the kernel of its step (a kernel template takes the function as a template parameter):
//   02.1 warp_reduce_sum: lane 0 must return its warp's sum; used in step 2's sum kernel
//        (grid-stride partials, one atomicAdd per warp), raced on 2^26 floats (256 MiB).
//   02.2 warp_butterfly_sum: every lane must return its warp's sum; used in a kernel where every
//        lane needs it (each element divided by the sum of its warp's elements), raced on 2^26 floats.
// Whole-number inputs make every warp sum exact in any order, so the checks compare exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/warp.cuh"
#include "lessons/02_warp_shuffle/reduce.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <warp_butterfly.cuh>
#include <warp_reduce.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/02_warp_shuffle/warp_butterfly.cuh"
#include "solutions/02_warp_shuffle/warp_reduce.cuh"
}  // namespace solution
#endif
namespace shfl_up {
#include "solutions/02_warp_shuffle/wrong/shfl_up.cuh"
}
namespace shfl_down_only {
#include "solutions/02_warp_shuffle/wrong/shfl_down_only.cuh"
}

namespace {

using WarpSum = float (*)(float);
using kl::grade::num;

constexpr int kWarps = 64;  // the direct checks: 64 full warps of values in [1, 1000] (a lost lane shows)

// Every lane writes what the warp function returned to it (02.1 reads lane 0's, 02.2 every lane's).
template <WarpSum kWarpSum>
__global__ void lane_results(const float* x, float* got) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  got[i] = kWarpSum(x[i]);
}

std::vector<float> run_lanes(void (*kernel)(const float*, float*), const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> got(host.size());
  got.poison();
  kernel<<<static_cast<unsigned>(host.size() / lesson02::kBlock), lesson02::kBlock>>>(x.data(), got.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  return got.download();
}

// ---- 02.1: step 2, the sum with one atomic per warp ---------------------------------------------

template <WarpSum kWarpSum>
__global__ void sum_warp_shuffle_down(const float* x, std::size_t n, float* out) {
  const float s = kWarpSum(lesson02::grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

using SumKernel = void (*)(const float*, std::size_t, float*);

// Launched as lesson 02 launches step 2: a grid that fills the GPU once, 256 threads a block.
void enqueue_sum(SumKernel kernel, const float* x, std::size_t n, float* out, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  kernel<<<lesson02::blocks_for(n, 1, kl::sm_count()), lesson02::kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

float run_sum(SumKernel kernel, const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  out.poison();
  enqueue_sum(kernel, x.data(), host.size(), out.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

// Lane 0 of each of 64 warps, then step 2's sum on awkward sizes: whole numbers (exact in any
// order), real numbers (within the float tolerance; the atomics add in a varying order), and a NaN
// as the very last element.
template <WarpSum kWarpSum>
kl::grade::Failure check_warp_reduce() {
  const auto host = kl::integer_floats(kWarps * 32, 1, 1000, kl::seed_for(21));
  const auto lanes = run_lanes(lane_results<kWarpSum>, host);
  for (int w = 0; w < kWarps; ++w) {
    const double want = kl::ref_sum(host.data() + 32 * w, 32).sum;
    if (lanes[32 * w] != want)
      return "warp " + std::to_string(w) + " of 32 values in [1, 1000]: lane 0 returned " + num(lanes[32 * w]) +
             ", expected the warp's sum " + num(want);
  }
  std::vector<std::size_t> sizes = {1, 31, 32, 33, 4097, 70001, 999983};
  if (!kl::grade::sanitized()) sizes.push_back(std::size_t{1} << 24);
  for (std::size_t n : sizes) {
    const std::string at = "n = " + std::to_string(n);
    const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n + 22));
    const double want = kl::ref_sum(whole.data(), n).sum;
    const float got = run_sum(sum_warp_shuffle_down<kWarpSum>, whole);
    if (got != want) return at + ", whole numbers: sum " + num(got) + ", expected " + num(want);
    const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 23));
    const kl::SumRef ref = kl::ref_sum(real.data(), n);
    const float got_real = run_sum(sum_warp_shuffle_down<kWarpSum>, real);
    if (!kl::sum_close(got_real, ref, n))
      return at + ", values in [-1, 1]: sum " + num(got_real) + ", expected " + num(ref.sum);
  }
  auto last_nan = kl::integer_floats(999983, -4, 4, kl::seed_for(24));
  last_nan.back() = NAN;
  const float got = run_sum(sum_warp_shuffle_down<kWarpSum>, last_nan);
  if (got == got) return "n = 999983, the last element NaN: sum " + num(got) + ", expected nan";
  return {};
}

// Times `mine` against the solution in step 2's kernel on 2^26 floats, then checks the sum there: whole
// numbers in [-4, 4], whose sum is exact in any order (the float tolerance of random reals at 2^26 terms
// would pass a sum of 0).
template <WarpSum kMine, WarpSum kSolution>
kl::grade::Speed race_warp_reduce() {
  if (kl::grade::sanitized()) return {};
  const std::size_t n = std::size_t{1} << 26;
  const std::vector<float> host = kl::integer_floats(n, -4, 4, kl::seed_for(26));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  const auto with = [&](SumKernel k) { return [&, k](cudaStream_t s) { enqueue_sum(k, x.data(), n, out.data(), s); }; };
  const auto check_timed = [&]() -> kl::grade::Failure {
    const float got = run_sum(sum_warp_shuffle_down<kMine>, host);
    const double want = kl::ref_sum(host.data(), n).sum;
    if (got == want) return {};
    return "n = " + std::to_string(n) + ", whole numbers: sum " + num(got) + ", expected " + num(want);
  };
  return kl::grade::race(with(sum_warp_shuffle_down<kMine>), with(sum_warp_shuffle_down<kSolution>), check_timed);
}

// ---- 02.2: step 3, every lane needs the sum -----------------------------------------------------

// y[i] = x[i] / (the sum of the elements of i's warp). One thread per element, so warp w holds
// x[32w .. 32w + 32). In the last warp, the lanes past n take part in the shuffles with 0 (all 32
// lanes must: the mask names them all) and write nothing; its sum is that of the elements it has.
template <WarpSum kWarpSum>
__global__ void divide_by_warp_sum(const float* x, std::size_t n, float* y) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const float v = i < n ? x[i] : 0.f;
  const float sum = kWarpSum(v);  // every lane needs it: each divides its own element
  if (i < n) y[i] = v / sum;
}

using DivideKernel = void (*)(const float*, std::size_t, float*);

void enqueue_divide(DivideKernel kernel, const float* x, std::size_t n, float* y, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((n + lesson02::kBlock - 1) / lesson02::kBlock);
  kernel<<<blocks, lesson02::kBlock, 0, s>>>(x, n, y);
  CUDA_CHECK_LAUNCH();
}

// The float division the kernel makes, on the CPU: the sums of whole numbers are exact, and the
// division is correctly rounded on both sides, so the results must match exactly (NaN for NaN).
kl::grade::Failure check_divided(const std::vector<float>& x, const std::string& at, DivideKernel kernel) {
  const std::size_t n = x.size();
  const kl::DeviceBuffer<float> dx(x);
  kl::DeviceBuffer<float> dy(n);
  dy.poison();
  enqueue_divide(kernel, dx.data(), n, dy.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = dy.download();
  for (std::size_t w = 0; 32 * w < n; ++w) {
    const std::size_t first = 32 * w, count = std::min<std::size_t>(32, n - first);
    float sum = 0.f;
    for (std::size_t i = first; i < first + count; ++i) sum += x[i];
    for (std::size_t i = first; i < first + count; ++i) {
      const float want = x[i] / sum;
      if (y[i] == want || (std::isnan(y[i]) && std::isnan(want))) continue;
      return at + ", element " + std::to_string(i) + " (lane " + std::to_string(i - first) + " of warp " +
             std::to_string(w) + "): " + num(x[i]) + " / its warp's sum = " + num(y[i]) + ", expected " + num(want) +
             " (the warp's sum is " + num(sum) + ")";
    }
  }
  return {};
}

// Every lane of 64 warps, then the division kernel on awkward sizes (a partial last warp), and with
// a NaN in warp 3, which must make all 32 elements of warp 3 NaN and no others.
template <WarpSum kWarpSum>
kl::grade::Failure check_warp_butterfly() {
  const auto host = kl::integer_floats(kWarps * 32, 1, 1000, kl::seed_for(31));
  const auto lanes = run_lanes(lane_results<kWarpSum>, host);
  for (int w = 0; w < kWarps; ++w) {
    const double want = kl::ref_sum(host.data() + 32 * w, 32).sum;
    for (int lane = 0; lane < 32; ++lane)
      if (lanes[32 * w + lane] != want)
        return "warp " + std::to_string(w) + " of 32 values in [1, 1000]: lane " + std::to_string(lane) + " returned " +
               num(lanes[32 * w + lane]) + ", expected the warp's sum " + num(want);
  }
  std::vector<std::size_t> sizes = {1, 31, 32, 33, 4097, 999983};
  if (!kl::grade::sanitized()) sizes.push_back(std::size_t{1} << 24);
  for (std::size_t n : sizes) {
    const auto x = kl::integer_floats(n, 1, 1000, kl::seed_for(n + 32));
    const auto failure =
        check_divided(x, "n = " + std::to_string(n) + ", values in [1, 1000]", divide_by_warp_sum<kWarpSum>);
    if (!failure.empty()) return failure;
  }
  auto with_nan = kl::integer_floats(4097, 1, 1000, kl::seed_for(33));
  with_nan[100] = NAN;
  return check_divided(with_nan, "n = 4097, element 100 NaN", divide_by_warp_sum<kWarpSum>);
}

// Times `mine` against the solution in the division kernel on 2^26 floats (256 MiB in, 256 MiB out),
// whole numbers so that the check afterwards, at that size, is exact.
template <WarpSum kMine, WarpSum kSolution>
kl::grade::Speed race_warp_butterfly() {
  if (kl::grade::sanitized()) return {};
  const std::size_t n = std::size_t{1} << 26;
  const std::vector<float> host = kl::integer_floats(n, 1, 1000, kl::seed_for(27));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> y(n);
  const auto with = [&](DivideKernel k) {
    return [&, k](cudaStream_t s) { enqueue_divide(k, x.data(), n, y.data(), s); };
  };
  return kl::grade::race(with(divide_by_warp_sum<kMine>), with(divide_by_warp_sum<kSolution>), [&] {
    return check_divided(host, "n = " + std::to_string(n) + ", values in [1, 1000]", divide_by_warp_sum<kMine>);
  });
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 02.1: the warp reduce, the warp's sum in lane 0") {
    kl::grade::verdict("02.1", check_warp_reduce<graded::warp_reduce_sum>(),
                       race_warp_reduce<graded::warp_reduce_sum, solution::warp_reduce_sum>());
  }

  TEST_CASE("exercise 02.2: the butterfly, the warp's sum in every lane") {
    kl::grade::verdict("02.2", check_warp_butterfly<graded::warp_butterfly_sum>(),
                       race_warp_butterfly<graded::warp_butterfly_sum, solution::warp_butterfly_sum>());
  }

  TEST_CASE("wrong 02.1: __shfl_up_sync gathers the sum in lane 31, not lane 0") {
    kl::grade::wrong_variant("02.1", "shfl_up", kl::grade::Fails::check, check_warp_reduce<shfl_up::warp_reduce_sum>(),
                             race_warp_reduce<shfl_up::warp_reduce_sum, solution::warp_reduce_sum>());
  }

  TEST_CASE("wrong 02.2: the shuffle-down reduce leaves the sum in lane 0 only") {
    kl::grade::wrong_variant("02.2", "shfl_down_only", kl::grade::Fails::check,
                             check_warp_butterfly<shfl_down_only::warp_butterfly_sum>(),
                             race_warp_butterfly<shfl_down_only::warp_butterfly_sum, solution::warp_butterfly_sum>());
  }
}
