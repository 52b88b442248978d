// Grades exercises 09.1 to 09.4, built twice (exercise09_test: the files of exercises/09_hopper_attention
// or a student's copy; solution09_test: the solutions and the wrong techniques, which must fail). Both
// binaries are compiled for sm_90a alone, like the lesson's Hopper steps; on another GPU the GPU parts
// are not graded. 09.1: the ring slot and its parities, on the CPU, then in a TMA pipeline of 2 and 3
// stages whose waits are bounded (a wait for a phase that never completes is reported, not hung).
// 09.2: step 5 with the graded softmax, against float64 on rows whose max grows along the keys.
// 09.3: the slot and parities across query tiles, on the CPU, then in a persistent pipeline (query
// tiles of 1 to 5 key tiles drawn from a counter, as step 7's) with the same bounded waits.
// 09.4: the group's AND, in blocks of three consumer groups and an idle producer warpgroup (step 8's
// shape at D = 64), over rounds of answers where one thread, one warp or one group differs.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/buffer.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/softmax_math.cuh"
#include "common/tma.cuh"
#include "common/warp.cuh"
#include "lessons/09_hopper_attention/hopper.cuh"
#include "lessons/09_hopper_attention/host.cuh"
#include "lessons/09_hopper_attention/problem.cuh"
#include "lessons/09_hopper_attention/steps/05_overlap.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <deferred_softmax.cuh>
#include <group_all.cuh>
#include <persistent_slot.cuh>
#include <ring_slot.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/09_hopper_attention/deferred_softmax.cuh"
#include "solutions/09_hopper_attention/group_all.cuh"
#include "solutions/09_hopper_attention/persistent_slot.cuh"
#include "solutions/09_hopper_attention/ring_slot.cuh"
}  // namespace solution
#endif
namespace round_per_query_tile {
#include "solutions/09_hopper_attention/wrong/round_per_query_tile.cuh"
}
namespace same_parity {
#include "solutions/09_hopper_attention/wrong/same_parity.cuh"
}
namespace sum_not_rescaled {
#include "solutions/09_hopper_attention/wrong/sum_not_rescaled.cuh"
}
namespace warp_vote {
#include "solutions/09_hopper_attention/wrong/warp_vote.cuh"
}

namespace {

using lesson09::Problem;

// ---- 09.1: the ring ---------------------------------------------------------------------------------------

template <class Ns>
struct Ring;
#define KL_RING(ns)                                                                                  \
  template <>                                                                                        \
  struct Ring<struct ns##_tag> {                                                                     \
    __host__ __device__ static auto slot(int t, int stages) { return ns::ring_slot(t, stages); } \
  };
KL_RING(graded)
KL_RING(solution)
KL_RING(same_parity)
#undef KL_RING

// A wait that gives up after two seconds (the GPU's global timer, in ns): a pipeline waiting for a
// phase that never completes reports it instead of hanging the grader; a slow wait (under
// compute-sanitizer) still completes.
__device__ bool wait_bounded(std::uint64_t* bar, int parity) {
  std::uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(start));
  while (true) {
    std::uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(kl::smem_u32(bar)), "r"(parity)
        : "memory");
    if (done) return true;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
    if (now - start > 2000000000ull) return false;
  }
}

// wait_bounded in every lane of a warp, which gives up together when any lane gave up: a warp whose lanes
// then shuffle never runs __shfl_xor_sync with a lane that has returned.
__device__ bool warp_wait_bounded(std::uint64_t* bar, int parity) {
  return !__any_sync(kl::kFullMask, !wait_bounded(bar, parity));
}

// Given: tiles of 64 x 64 f16 stream through a ring of kStages slots. Thread 0 (the producer) refills
// slot ring_slot(i).stage with the block's i-th tile once the consumers have emptied it; warpgroup 1
// (the consumers) waits for each tile, adds it up into sums[tile] and releases the slot.
template <class R, int kStages>
__global__ void __launch_bounds__(256) ring_sums(const __grid_constant__ CUtensorMap map, int tiles, float* sums,
                                                 int* stuck) {
  __shared__ __align__(1024) unsigned char slot[kStages][64 * 64 * 2];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      kl::mbarrier_init(full + s, 1);
      kl::mbarrier_init(empty + s, 128);
    }
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    if (threadIdx.x != 0) return;
    for (int i = 0, tile = blockIdx.x; tile < tiles; ++i, tile += gridDim.x) {
      const auto sl = R::slot(i, kStages);
      if (!wait_bounded(empty + sl.stage, sl.empty_parity)) {
        atomicExch(stuck, 1);
        return;
      }
      kl::mbarrier_arrive_expect_tx(full + sl.stage, sizeof(slot[0]));
      kl::tma_load_3d(slot[sl.stage], &map, 0, 0, tile, full + sl.stage);
    }
    return;
  }
  const int c = threadIdx.x - 128;
  for (int i = 0, tile = blockIdx.x; tile < tiles; ++i, tile += gridDim.x) {
    const auto sl = R::slot(i, kStages);
    if (!warp_wait_bounded(full + sl.stage, sl.full_parity)) {
      atomicExch(stuck, 1);
      return;
    }
    const auto* h = reinterpret_cast<const __half2*>(slot[sl.stage]) + c * 16;  // 32 f16 a thread
    float part = 0;
    for (int j = 0; j < 16; ++j) {
      const float2 f = __half22float2(h[j]);
      part += f.x + f.y;
    }
    for (int o = 16; o > 0; o /= 2) part += __shfl_xor_sync(kl::kFullMask, part, o);
    if (c % 32 == 0) atomicAdd(sums + tile, part);
    kl::mbarrier_arrive(empty + sl.stage);
  }
}

// After a run of a pipeline harness: "" when it neither stalled nor got a sum wrong, else what went
// wrong, after `at` (where: stages, blocks, tiles); `item` names a summed unit, `read` what was misread.
std::string run_verdict(const std::string& at, const kl::DeviceBuffer<int>& stuck, const kl::DeviceBuffer<float>& sums,
                        const std::vector<float>& want, const std::string& item, const std::string& read) {
  CUDA_CHECK(cudaDeviceSynchronize());
  if (stuck.download(1)[0]) return at + "the pipeline stalled (a wait for a phase of a barrier that never completes)";
  const auto got = sums.download();
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return at + item + std::to_string(i) + " summed to " + kl::grade::num(got[i]) + ", expected " +
             kl::grade::num(want[i]) + " (" + read + " read before it landed or after it was overwritten)";
  return {};
}

// Whole numbers in [-8, 8]: every tile's sum is exact in f32, in any order.
struct RingInput {
  std::vector<float> sums;
  kl::DeviceBuffer<__half> x;
  CUtensorMap map;
};
RingInput ring_input(int tiles) {
  RingInput in;
  const auto v = kl::integer_floats(std::size_t(tiles) * 4096, -8, 8, kl::seed_for(tiles + 81));
  std::vector<__half> h(v.size());
  in.sums.assign(tiles, 0.f);
  for (std::size_t i = 0; i < v.size(); ++i) {
    h[i] = __float2half(v[i]);
    in.sums[i / 4096] += v[i];
  }
  in.x.upload(h);
  in.map = lesson09::head_tensor_map(in.x.data(), tiles, 64, 64);
  return in;
}

template <class R, int kStages>
void enqueue_ring(const RingInput& in, int tiles, int blocks, float* sums, int* stuck, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(float) * tiles, s));
  ring_sums<R, kStages><<<blocks, 256, 0, s>>>(in.map, tiles, sums, stuck);
  CUDA_CHECK_LAUNCH();
}

template <class R>
kl::grade::Failure check_ring_gpu() {
  for (int stages : {2, 3})
    for (auto [tiles, blocks] : {std::pair{1, 1}, {2, 1}, {5, 1}, {7, 1}, {100, 3}, {1000, 8}}) {
      const std::string at = std::to_string(stages) + " stages, " + std::to_string(blocks) + " block(s), " +
                             std::to_string(tiles) + " tiles: ";
      const RingInput in = ring_input(tiles);
      kl::DeviceBuffer<float> sums(tiles);
      kl::DeviceBuffer<int> stuck(1);
      CUDA_CHECK(cudaMemset(stuck.data(), 0, sizeof(int)));
      if (stages == 2) enqueue_ring<R, 2>(in, tiles, blocks, sums.data(), stuck.data(), nullptr);
      else enqueue_ring<R, 3>(in, tiles, blocks, sums.data(), stuck.data(), nullptr);
      if (std::string why = run_verdict(at, stuck, sums, in.sums, "tile ", "it was"); !why.empty()) return why;
    }
  return {};
}

// 2^15 tiles of 8 KiB (256 MiB), 4 blocks a SM, 3 stages; then every tile's sum there, exactly.
template <class Mine>
kl::grade::Speed race_ring() {
  if (kl::grade::sanitized()) return {};
  const int tiles = 1 << 15, blocks = 4 * kl::sm_count();
  const RingInput in = ring_input(tiles);
  kl::DeviceBuffer<float> sums(tiles);
  kl::DeviceBuffer<int> stuck(1);
  CUDA_CHECK(cudaMemset(stuck.data(), 0, sizeof(int)));
  const auto mine = [&](cudaStream_t s) { enqueue_ring<Mine, 3>(in, tiles, blocks, sums.data(), stuck.data(), s); };
  const auto solution = [&](cudaStream_t s) {
    enqueue_ring<Ring<struct solution_tag>, 3>(in, tiles, blocks, sums.data(), stuck.data(), s);
  };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, sums, 0, 0);
    return f.empty() ? f : "2^15 tiles: the sum of " + f;
  });
}

// ---- 09.3: the ring across query tiles ----------------------------------------------------------------------

template <class Ns>
struct Persistent;
#define KL_PERSISTENT(ns)                                                                      \
  template <>                                                                                  \
  struct Persistent<struct ns##_tag> {                                                         \
    __host__ __device__ static auto slot(int n, int before, int kt, int stages) {              \
      return ns::persistent_slot(n, before, kt, stages);                                       \
    }                                                                                          \
  };
KL_PERSISTENT(graded)
KL_PERSISTENT(solution)
KL_PERSISTENT(round_per_query_tile)
#undef KL_PERSISTENT

// Given: step 7's loop without the attention. Thread 0 (the producer) draws query tiles from *next
// until none is left, hands each one's number to the consumers in shared memory (its "full" barrier,
// then their release of the number, as step 7 does with Q) and streams its key tiles, first[q] ...
// first[q + 1] - 1 of the 64 x 64 f16 tiles, through the ring; warpgroup 1 adds every key tile of
// query tile q into sums[q]. The ring's slots and phases are persistent_slot's. Whatever they are, the
// producer lets each slot's previous load land before the next one and before it leaves (fills[]
// counts them), so that a wrong answer gives wrong sums or a reported stall, never a fault.
template <class P, int kStages>
__global__ void __launch_bounds__(256) persistent_sums(const __grid_constant__ CUtensorMap map, int queries,
                                                       const int* first, unsigned* next, float* sums, int* stuck) {
  __shared__ __align__(1024) unsigned char slot[kStages][64 * 64 * 2];
  __shared__ std::uint64_t full[kStages], empty[kStages], q_full, q_empty;
  __shared__ volatile int drawn;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      kl::mbarrier_init(full + s, 1);
      kl::mbarrier_init(empty + s, 128);
    }
    kl::mbarrier_init(&q_full, 1);
    kl::mbarrier_init(&q_empty, 128);
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    if (threadIdx.x != 0) return;
    int fills[kStages] = {};
    const auto landed = [&](int st) { return fills[st] == 0 || wait_bounded(full + st, (fills[st] - 1) % 2); };
    const auto leave = [&](bool stalled) {
      for (int st = 0; st < kStages; ++st) stalled |= !landed(st);
      if (stalled) atomicExch(stuck, 1);
    };
    for (int n = 0, before = 0;; ++n) {
      if (!wait_bounded(&q_empty, (n + 1) % 2)) return leave(true);  // the consumers have read the last number
      const int q = static_cast<int>(atomicAdd(next, 1u));
      drawn = q;
      kl::mbarrier_arrive(&q_full);
      if (q >= queries) return leave(false);
      const int keys = first[q + 1] - first[q];
      for (int kt = 0; kt < keys; ++kt) {
        const auto sl = P::slot(n, before, kt, kStages);
        if (!wait_bounded(empty + sl.stage, sl.empty_parity) || !landed(sl.stage)) return leave(true);
        ++fills[sl.stage];
        kl::mbarrier_arrive_expect_tx(full + sl.stage, sizeof(slot[0]));
        kl::tma_load_3d(slot[sl.stage], &map, 0, 0, first[q] + kt, full + sl.stage);
      }
      before += keys;
    }
  }
  const int c = threadIdx.x - 128;
  for (int n = 0, before = 0;; ++n) {
    if (!warp_wait_bounded(&q_full, n % 2)) {
      atomicExch(stuck, 1);
      return;
    }
    const int q = drawn;
    kl::mbarrier_arrive(&q_empty);
    if (q >= queries) return;
    const int keys = first[q + 1] - first[q];
    float part = 0;
    for (int kt = 0; kt < keys; ++kt) {
      const auto sl = P::slot(n, before, kt, kStages);
      if (!warp_wait_bounded(full + sl.stage, sl.full_parity)) {
        atomicExch(stuck, 1);
        return;
      }
      const auto* h = reinterpret_cast<const __half2*>(slot[sl.stage]) + c * 16;  // 32 f16 a thread
      for (int j = 0; j < 16; ++j) {
        const float2 f = __half22float2(h[j]);
        part += f.x + f.y;
      }
      kl::mbarrier_arrive(empty + sl.stage);
    }
    for (int o = 16; o > 0; o /= 2) part += __shfl_xor_sync(kl::kFullMask, part, o);
    if (c % 32 == 0) atomicAdd(sums + q, part);
    before += keys;
  }
}

// Query tile q has 1 + (7 q + 3) % 5 key tiles (1 to 5, so that they rarely fill the ring exactly); the
// key tiles are whole numbers in [-8, 8], and every query tile's sum is exact in f32, in any order.
struct PersistentInput {
  std::vector<int> first;
  std::vector<float> sums;
  kl::DeviceBuffer<int> d_first;
  kl::DeviceBuffer<__half> x;
  CUtensorMap map;
};
PersistentInput persistent_input(int queries) {
  PersistentInput in;
  in.first.assign(1, 0);
  for (int q = 0; q < queries; ++q) in.first.push_back(in.first.back() + 1 + (7 * q + 3) % 5);
  const int tiles = in.first.back();
  const auto v = kl::integer_floats(std::size_t(tiles) * 4096, -8, 8, kl::seed_for(queries + 93));
  std::vector<__half> h(v.size());
  std::vector<float> tile_sums(tiles, 0.f);
  for (std::size_t i = 0; i < v.size(); ++i) {
    h[i] = __float2half(v[i]);
    tile_sums[i / 4096] += v[i];
  }
  in.sums.assign(queries, 0.f);
  for (int q = 0; q < queries; ++q)
    for (int t = in.first[q]; t < in.first[q + 1]; ++t) in.sums[q] += tile_sums[t];
  in.d_first.upload(in.first);
  in.x.upload(h);
  in.map = lesson09::head_tensor_map(in.x.data(), tiles, 64, 64);
  return in;
}

template <class P, int kStages>
void enqueue_persistent(const PersistentInput& in, int queries, int blocks, unsigned* next, float* sums, int* stuck,
                        cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(float) * queries, s));
  CUDA_CHECK(cudaMemsetAsync(next, 0, sizeof(unsigned), s));
  persistent_sums<P, kStages><<<blocks, 256, 0, s>>>(in.map, queries, in.d_first.data(), next, sums, stuck);
  CUDA_CHECK_LAUNCH();
}

template <class P>
kl::grade::Failure check_persistent_gpu() {
  for (int stages : {2, 3})
    for (auto [queries, blocks] : {std::pair{1, 1}, {2, 1}, {5, 1}, {9, 2}, {200, 3}, {1000, 8}}) {
      const std::string at = std::to_string(stages) + " stages, " + std::to_string(blocks) + " block(s), " +
                             std::to_string(queries) + " query tiles: ";
      const PersistentInput in = persistent_input(queries);
      kl::DeviceBuffer<float> sums(queries);
      kl::DeviceBuffer<unsigned> next(1);
      kl::DeviceBuffer<int> stuck(1);
      CUDA_CHECK(cudaMemset(stuck.data(), 0, sizeof(int)));
      if (stages == 2) enqueue_persistent<P, 2>(in, queries, blocks, next.data(), sums.data(), stuck.data(), nullptr);
      else enqueue_persistent<P, 3>(in, queries, blocks, next.data(), sums.data(), stuck.data(), nullptr);
      if (std::string why = run_verdict(at, stuck, sums, in.sums, "query tile ", "a key tile was"); !why.empty())
        return why;
    }
  return {};
}

// 2^13 query tiles (about 24500 key tiles of 8 KiB), 4 blocks a SM, 3 stages; then every sum there, exactly.
template <class Mine>
kl::grade::Speed race_persistent() {
  if (kl::grade::sanitized()) return {};
  const int queries = 1 << 13, blocks = 4 * kl::sm_count();
  const PersistentInput in = persistent_input(queries);
  kl::DeviceBuffer<float> sums(queries);
  kl::DeviceBuffer<unsigned> next(1);
  kl::DeviceBuffer<int> stuck(1);
  CUDA_CHECK(cudaMemset(stuck.data(), 0, sizeof(int)));
  const auto mine = [&](cudaStream_t s) {
    enqueue_persistent<Mine, 3>(in, queries, blocks, next.data(), sums.data(), stuck.data(), s);
  };
  const auto solution = [&](cudaStream_t s) {
    enqueue_persistent<Persistent<struct solution_tag>, 3>(in, queries, blocks, next.data(), sums.data(),
                                                           stuck.data(), s);
  };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, sums, 0, 0);
    return f.empty() ? f : "2^13 query tiles: the sum of " + f;
  });
}

// ---- 09.2: step 5's softmax -----------------------------------------------------------------------------

template <class Ns>
struct Softmax;
#define KL_SOFTMAX(ns)                                                                                  \
  template <>                                                                                           \
  struct Softmax<struct ns##_tag> {                                                                     \
    __device__ __forceinline__ static void apply(float (&s)[32], float (&m)[2], float (&l)[2], float (&a)[2], \
                                                 float c) {                                             \
      ns::softmax_deferred(s, m, l, a, c);                                                              \
    }                                                                                                   \
  };
KL_SOFTMAX(graded)
KL_SOFTMAX(solution)
KL_SOFTMAX(sum_not_rescaled)
#undef KL_SOFTMAX

template <class Sm, int D, bool kCausal>
struct OverlapWith {
  static void run(const Problem& p, cudaStream_t s) {
    lesson09::launch_flash<lesson09::flash_overlap<D, kCausal, Sm>>(lesson09::flash_ws_smem<D>(), lesson09::kWsThreads,
                                                                      p, s, lesson09::tma_maps(p));
  }
};
template <class Sm>
void enqueue_overlap(const Problem& p, cudaStream_t s) {
  if (p.dim == 64) p.causal ? OverlapWith<Sm, 64, true>::run(p, s) : OverlapWith<Sm, 64, false>::run(p, s);
  else p.causal ? OverlapWith<Sm, 128, true>::run(p, s) : OverlapWith<Sm, 128, false>::run(p, s);
}

// Q, K, V uniform with unit variance from the seeds kl::seed_for(seed), (seed + 1) and (seed + 2),
// rounded to f16; `growing`: K's rows lean more and more towards Q's, so that a row's max grows with
// every key tile (the case a missing rescale gets wrong).
lesson07::HostQkv attention_inputs(const Problem& p, bool growing, std::uint64_t seed) {
  const auto n = static_cast<std::size_t>(p.elements());
  std::vector<float> q = lesson07::unit_uniform(n, kl::seed_for(seed)),
                     k = lesson07::unit_uniform(n, kl::seed_for(seed + 1)),
                     v = lesson07::unit_uniform(n, kl::seed_for(seed + 2));
  if (growing) {
    for (std::size_t j = 0; j < n; ++j) k[j] += 3.0f * static_cast<float>((j / p.dim) % p.seq) / p.seq;
    for (std::size_t j = 0; j < n; ++j) q[j] = 0.5f + 0.25f * q[j];
  }
  return {lesson07::f16_rounded(std::move(q)), lesson07::f16_rounded(std::move(k)),
          lesson07::f16_rounded(std::move(v))};
}

// Those inputs on the CPU (for the reference) and on the GPU with O; p is pointed at the GPU's.
struct Attention {
  lesson07::HostQkv in;
  lesson07::DeviceQkvo d;
  Attention(Problem& p, bool growing, std::uint64_t seed) : in(attention_inputs(p, growing, seed)), d(in) {
    p = d.on(p);
  }
};

template <class Sm>
kl::grade::Failure check_softmax() {
  const std::vector<int> seqs =
      kl::grade::sanitized() ? std::vector<int>{17, 129} : std::vector<int>{1, 17, 64, 100, 129, 1000};
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (int seq : seqs)
        for (bool growing : {false, true}) {
          Problem p = lesson09::flash_problem(1, 2, seq, d, causal);
          Attention a(p, growing, 1000 * seq + d + causal);
          a.d.o.poison();
          enqueue_overlap<Sm>(p, nullptr);
          CUDA_CHECK(cudaDeviceSynchronize());
          const std::vector<double> ref = lesson09::reference(a.in.q, a.in.k, a.in.v, p);
          const double err = lesson09::max_error(a.d.o.download(), ref, lesson09::all_rows(p), d);
          if (!(err <= lesson09::kRel))
            return "S = " + std::to_string(seq) + ", D = " + std::to_string(d) + (causal ? ", causal" : "") +
                   (growing ? ", max growing along the keys" : ", random") + ": error " + kl::grade::num(err) +
                   ", expected <= " + kl::grade::num(lesson09::kRel);
        }
  return {};
}

// B = 16, H = 16, S = 4096, D = 128 (3 x 256 MiB of inputs), where step 5 is the lesson's fastest;
// then O there against the solution's.
template <class Mine>
kl::grade::Speed race_softmax() {
  if (kl::grade::sanitized()) return {};
  Problem p = lesson09::flash_problem(16, 16, 4096, 128, false);
  Attention a(p, false, 7);
  const auto mine = [&](cudaStream_t s) { enqueue_overlap<Mine>(p, s); };
  const auto solution = [&](cudaStream_t s) { enqueue_overlap<Softmax<struct solution_tag>>(p, s); };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, a.d.o, 2e-2, 2e-3);
    return f.empty() ? f : "O's " + f;
  });
}

// ---- 09.4: the group's answer -------------------------------------------------------------------------------

template <class Ns>
struct Group;
#define KL_GROUP(ns)                                                                                     \
  template <>                                                                                            \
  struct Group<struct ns##_tag> {                                                                        \
    __device__ static bool all(bool pred, int group) { return ns::group_all(pred, group); }              \
  };
KL_GROUP(graded)
KL_GROUP(solution)
KL_GROUP(warp_vote)
#undef KL_GROUP

constexpr int kVoteGroups = 3, kVoteThreads = 128 * (1 + kVoteGroups);

// An integer hash (a multiply-xorshift mix): the same bits on the host and the GPU.
__host__ __device__ inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

// The answer thread c (0-127) of group g brings to round r of block b. Rounds cycle through six kinds:
// all true; all false; one thread false; one warp false; each false with probability 1/256 (about 60 % of
// the groups all true); group 1 with one thread false while groups 0 and 2 are all true.
__host__ __device__ inline bool vote(int b, int r, int g, int c) {
  const int k = r / 6;
  switch (r % 6) {
    case 0: return true;
    case 1: return false;
    case 2: return c != (7 * k + 31 * g + b) % 128;
    case 3: return c / 32 != (k + g + b) % 4;
    case 4: return mix32(static_cast<std::uint32_t>(((b * 4096 + r) * 4 + g) * 128 + c)) % 256 != 0;
    default: return g != 1 || c != (5 * k + b) % 128;
  }
}

// Given: blocks of step 8's shape at D = 64 (a producer warpgroup that leaves at once, three consumer
// groups). Each consumer thread calls group_all once a round; with `out` it records every answer, else it
// counts the rounds that returned true into counts[] (what the timed runs compare).
template <class G>
__global__ void __launch_bounds__(kVoteThreads) group_votes(int rounds, unsigned char* out, unsigned* counts) {
  if (threadIdx.x < 128) return;  // the producer warpgroup takes no part, as in step 8
  const int g = threadIdx.x / 128 - 1, c = threadIdx.x % 128;
  unsigned count = 0;
  for (int r = 0; r < rounds; ++r) {
    const bool all = G::all(vote(blockIdx.x, r, g, c), g);
    if (out) out[(static_cast<std::size_t>(blockIdx.x) * rounds + r) * 384 + 128 * g + c] = all;
    count += all;
  }
  if (counts) counts[blockIdx.x * 384 + 128 * g + c] = count;
}

template <class G>
kl::grade::Failure check_group_gpu() {
  const int blocks = 4, rounds = kl::grade::sanitized() ? 60 : 600;
  kl::DeviceBuffer<unsigned char> out(static_cast<std::size_t>(blocks) * rounds * 384);
  out.poison();
  group_votes<G><<<blocks, kVoteThreads>>>(rounds, out.data(), nullptr);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<unsigned char> got = out.download();
  static const char* kinds[] = {"all true", "all false", "one thread false", "one warp false",
                                "a few threads false", "one thread of group 1 false"};
  for (int b = 0; b < blocks; ++b)
    for (int r = 0; r < rounds; ++r)
      for (int g = 0; g < kVoteGroups; ++g) {
        int falses = 0;
        for (int c = 0; c < 128; ++c) falses += !vote(b, r, g, c);
        for (int c = 0; c < 128; ++c) {
          const unsigned char v = got[(static_cast<std::size_t>(b) * rounds + r) * 384 + 128 * g + c];
          if (v != (falses == 0))
            return "block " + std::to_string(b) + ", round " + std::to_string(r) + " (" + kinds[r % 6] +
                   "), group " + std::to_string(g) + ": thread " + std::to_string(c) + " (warp " +
                   std::to_string(c / 32) + ") got " + (v > 1 ? std::string("nothing") : std::to_string(v)) +
                   ", expected " + std::to_string(falses == 0) + " (" + std::to_string(falses) +
                   " of the group's 128 answers false)";
        }
      }
  return {};
}

// 2^14 rounds in one block per SM; then every thread's count of true answers, exactly.
template <class Mine>
kl::grade::Speed race_group() {
  if (kl::grade::sanitized()) return {};
  const int blocks = kl::sm_count(), rounds = 1 << 14;
  kl::DeviceBuffer<unsigned> counts(static_cast<std::size_t>(blocks) * 384);
  const auto mine = [&](cudaStream_t s) {
    group_votes<Mine><<<blocks, kVoteThreads, 0, s>>>(rounds, nullptr, counts.data());
  };
  const auto solution = [&](cudaStream_t s) {
    group_votes<Group<struct solution_tag>><<<blocks, kVoteThreads, 0, s>>>(rounds, nullptr, counts.data());
  };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, counts, 0, 0);
    return f.empty() ? f : "2^14 rounds: the count of " + f;
  });
}

}  // namespace

TEST_CASE("exercise 09.1 [cpu]: ring_slot gives the slot and the parities of every tile") {
  for (int stages = 1; stages <= 4; ++stages)
    for (int t = 0; t < 40; ++t) {
      const auto got = graded::ring_slot(t, stages);
      const int round = t / stages;
      INFO("tile t = " << t << " with " << stages << " stages (slot " << t % stages << " filled " << round
                       << " times before it)");
      CHECK(got.stage == t % stages);
      CHECK(got.full_parity == round % 2);
      CHECK(got.empty_parity == (round + 1) % 2);
    }
}

TEST_CASE("exercise 09.3 [cpu]: persistent_slot continues the ring from one query tile to the next") {
  for (int stages = 1; stages <= 4; ++stages)
    for (int n = 0; n < 6; ++n)
      for (int before : {n, 2 * n + 1, 5 * n})
        for (int kt = 0; kt < 12; ++kt) {
          const auto got = graded::persistent_slot(n, before, kt, stages);
          const int t = before + kt, round = t / stages;
          INFO("key tile " << kt << " of query tile " << n << " after " << before << " key tiles, " << stages
                           << " stages (the block's tile " << t << " through the ring)");
          CHECK(got.stage == t % stages);
          CHECK(got.full_parity == round % 2);
          CHECK(got.empty_parity == (round + 1) % 2);
        }
}

TEST_SUITE("gpu") {
  TEST_CASE("exercise 09.1: the ring of a TMA pipeline, 2 and 3 stages") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.1", lesson09::hopper_missing());
    kl::grade::verdict("09.1", check_ring_gpu<Ring<struct graded_tag>>(), race_ring<Ring<struct graded_tag>>());
  }

  TEST_CASE("exercise 09.3: the ring of a persistent pipeline across query tiles, 2 and 3 stages") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.3", lesson09::hopper_missing());
    kl::grade::verdict("09.3", check_persistent_gpu<Persistent<struct graded_tag>>(),
                       race_persistent<Persistent<struct graded_tag>>());
  }

  TEST_CASE("exercise 09.2: step 5's deferred softmax") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.2", lesson09::hopper_missing());
    kl::grade::verdict("09.2", check_softmax<Softmax<struct graded_tag>>(),
                       race_softmax<Softmax<struct graded_tag>>());
  }

  TEST_CASE("exercise 09.4: step 8's decision, one answer for the group's 128 threads") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.4", lesson09::hopper_missing());
    kl::grade::verdict("09.4", check_group_gpu<Group<struct graded_tag>>(), race_group<Group<struct graded_tag>>());
  }

  TEST_CASE("wrong 09.4: a warp's vote splits the group") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.4", lesson09::hopper_missing());
    kl::grade::wrong_variant("09.4", "warp_vote", kl::grade::Fails::check, check_group_gpu<Group<struct warp_vote_tag>>(),
                             {});
  }

  TEST_CASE("wrong 09.1: the producer waiting on the consumers' parity stalls the pipeline") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.1", lesson09::hopper_missing());
    kl::grade::wrong_variant("09.1", "same_parity", kl::grade::Fails::check, check_ring_gpu<Ring<struct same_parity_tag>>(),
                             {});
  }

  TEST_CASE("wrong 09.3: a round of its own for every query tile loses the ring's phases") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.3", lesson09::hopper_missing());
    kl::grade::wrong_variant("09.3", "round_per_query_tile", kl::grade::Fails::check,
                             check_persistent_gpu<Persistent<struct round_per_query_tile_tag>>(), {});
  }

  TEST_CASE("wrong 09.2: a running sum that is not rescaled") {
    if (!lesson09::hopper_available()) return kl::grade::not_graded("09.2", lesson09::hopper_missing());
    kl::grade::wrong_variant("09.2", "sum_not_rescaled", kl::grade::Fails::check,
                             check_softmax<Softmax<struct sum_not_rescaled_tag>>(),
                             race_softmax<Softmax<struct sum_not_rescaled_tag>>());
  }
}
