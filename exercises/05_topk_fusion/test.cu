// Grades exercises 05.1, 05.2 and 05.3, built twice: exercise05_test grades the files of
// exercises/05_topk_fusion (or a student's copy), solution05_test the solutions and the wrong
// techniques kept beside them, which must fail. Both exercises are kernels of the same form,
// topk_...<KC>(x, rows, vocab, k, prob, idx): the k largest softmax probabilities of each row and
// their indices, with lists of KC >= k keys, launched as lesson 05 launches steps 2 and 3 (one warp
// per row, 8 rows per block of 256 threads).
//   05.1 topk_insert, in step 2's kernel topk_warp_per_row;
//   05.2 topk_warp_vector, step 3: 16-byte loads and an early reject;
//   05.3 group_finish, in a streaming form of step 7's topk_lanes_per_row (a row per group of lanes, one more
//        argument: the group's size), on rows of 1 to 256 logits, raced at 65536 x 8, k = 2.
// Checked against the float64 reference (indices exactly, probabilities within lesson 05's f32
// tolerance) for k = 1, 5, 32 (lists of k) and k = 10 (a list of 16, as the lesson runs it) on rows
// of 1 to 50257 logits: ties, rising and falling rows, large magnitudes, -inf, NaN, +inf, and views
// that start off a 16-byte boundary. Raced at 4096 x 50257, k = 10 (823 MB of logits).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/buffer.cuh"
#include "common/grade.cuh"
#include "common/pack.cuh"
#include "common/random.hpp"
#include "lessons/05_topk_fusion/parts.cuh"
#include "lessons/05_topk_fusion/host.cuh"
#include "lessons/05_topk_fusion/problem.cuh"
#include "lessons/05_topk_fusion/steps/07_lanes_per_row.cuh"  // lanes_per_row: the group size step 7 uses

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <lanes_per_row.cuh>
#include <topk_insert.cuh>
#include <warp_vector.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/05_topk_fusion/lanes_per_row.cuh"
#include "solutions/05_topk_fusion/topk_insert.cuh"
#include "solutions/05_topk_fusion/warp_vector.cuh"
}  // namespace solution
#endif
namespace max_only {
#include "solutions/05_topk_fusion/wrong/max_only.cuh"
}
namespace runtime_slot {
#include "solutions/05_topk_fusion/wrong/runtime_slot.cuh"
}
namespace scalar_loop {
#include "solutions/05_topk_fusion/wrong/scalar_loop.cuh"
}
namespace packs_only {
#include "solutions/05_topk_fusion/wrong/packs_only.cuh"
}
namespace whole_warp {
#include "solutions/05_topk_fusion/wrong/whole_warp.cuh"
}

namespace {

using kl::grade::num;
using TopkKernel = void (*)(const float*, std::int64_t, int, int, float*, int*);

void enqueue_topk(TopkKernel kernel, const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx,
                  cudaStream_t s) {
  kernel<<<lesson05::warp_grid(rows), 32 * lesson05::kWarpsPerBlock, 0, s>>>(x, rows, vocab, k, prob, idx);
  CUDA_CHECK_LAUNCH();
}

// Runs one kernel on x (rows x vocab), `offset` floats past a 16-byte boundary, its outputs
// poisoned with a finite value (0x3C3C3C3C): a NaN probability must be written as NaN, and an
// output left unwritten shows.
// The group-of-lanes kernels take the group's size too (lesson05::lanes_per_row of V): a thread per row of the
// block's 256 threads when a group is one lane.
using LanesKernel = void (*)(const float*, std::int64_t, int, int, int, float*, int*);

void enqueue_lanes(LanesKernel kernel, const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx,
                   cudaStream_t s) {
  const int lanes = lesson05::lanes_per_row(vocab), threads = 32 * lesson05::kWarpsPerBlock;
  kernel<<<static_cast<unsigned>((rows * lanes + threads - 1) / threads), threads, 0, s>>>(x, rows, vocab, k, lanes,
                                                                                          prob, idx);
  CUDA_CHECK_LAUNCH();
}

// How the grader launches a kernel of either form.
using Launch = std::function<void(const float*, std::int64_t, int, int, float*, int*, cudaStream_t)>;

Launch warp_launch(TopkKernel kernel) {
  return [kernel](const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx, cudaStream_t s) {
    enqueue_topk(kernel, x, rows, vocab, k, prob, idx, s);
  };
}

Launch lanes_launch(LanesKernel kernel) {
  return [kernel](const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx, cudaStream_t s) {
    enqueue_lanes(kernel, x, rows, vocab, k, prob, idx, s);
  };
}

void run_topk(const Launch& launch, const std::vector<float>& x, std::int64_t rows, int vocab, int k, int offset,
              std::vector<float>& prob, std::vector<int>& idx) {
  std::vector<float> shifted(x.size() + offset, 0.f);
  std::copy(x.begin(), x.end(), shifted.begin() + offset);
  const kl::DeviceBuffer<float> dx(shifted);
  kl::DeviceBuffer<float> dprob(rows * k);
  kl::DeviceBuffer<int> didx(rows * k);
  dprob.poison(0x3C);
  didx.poison(0x3C);
  launch(dx.data() + offset, rows, vocab, k, dprob.data(), didx.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  prob = dprob.download();
  idx = didx.download();
}

// The first (row, rank) whose index is not the reference's or whose probability is off by more
// than the f32 tolerance (or NaN where the reference is not), as one line; "" when all are right.
kl::grade::Failure check_one(const Launch& launch, const std::string& what, const std::vector<float>& x, std::int64_t rows,
                             int vocab, int k, int kc, int offset = 0) {
  std::vector<float> prob;
  std::vector<int> idx;
  run_topk(launch, x, rows, vocab, k, offset, prob, idx);
  const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
  const lesson05::Tolerance tol = lesson05::tolerance(lesson05::Dtype::f32);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const std::int64_t i = r * k + j;
      if (idx[i] == ref.idx[i] && lesson05::prob_error(prob[i], ref.prob[i], tol) <= tol.rel) continue;
      return what + (offset ? ", the logits " + std::to_string(offset) + " floats past a 16-byte boundary" : "") +
             ", V = " + std::to_string(vocab) + ", k = " + std::to_string(k) + " (a list of " + std::to_string(kc) +
             "), row " + std::to_string(r) + ", rank " + std::to_string(j) + ": index " + std::to_string(idx[i]) +
             " with p = " + num(prob[i]) + ", expected index " + std::to_string(ref.idx[i]) +
             " with p = " + num(ref.prob[i]) + " (relative error at most " + num(tol.rel) + ")";
    }
  }
  return {};
}

// Rows 0-4 of special values, the others normal: row 0 with half its logits -inf, row 1 with only
// 3 finite logits (at 1, 4, 7; fewer than k: -inf fills in by index with p = 0), row 2 only -inf
// (NaN probabilities), row 3 with two NaN (ranked first, NaN probabilities), row 4 with +inf (NaN).
std::vector<float> special_values(std::int64_t rows, int vocab) {
  auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(540 + vocab));
  kl::Rng rng(kl::seed_for(541 + vocab));
  for (int i = 0; i < vocab / 2; ++i) x[rng.index(vocab)] = -INFINITY;
  for (int c = 0; c < vocab; ++c) x[1 * vocab + c] = c % 3 == 1 && c < 9 ? static_cast<float>(c) : -INFINITY;
  for (int c = 0; c < vocab; ++c) x[2 * vocab + c] = -INFINITY;
  x[3 * vocab + vocab / 2] = NAN;
  x[3 * vocab + vocab - 1] = NAN;
  x[4 * vocab + vocab / 3] = INFINITY;
  return x;
}

// Every input for one list length KC (run at k = kc == 16 ? 10 : kc) and one row length; three of
// them, on 8 rows, under the sanitizer.
kl::grade::Failure check_vocab(TopkKernel kernel, int kc, int vocab) {
  const int k = kc == 16 ? 10 : kc;
  const bool small = kl::grade::sanitized();
  const std::int64_t rows = vocab <= 100 ? (small ? 8 : 64) : vocab <= 4097 ? (small ? 8 : 16) : 4;
  const auto n = static_cast<std::size_t>(rows * vocab);
  const auto seed = static_cast<std::uint64_t>(vocab) * 64 + kc * 8;
  const auto check = [&](const std::string& what, const std::vector<float>& x, int offset = 0) {
    return check_one(warp_launch(kernel), what, x, rows, vocab, k, kc, offset);
  };
  const auto normal = kl::normal_floats(n, 0, 2, kl::seed_for(seed));
  kl::grade::Failure f = check("normal(0, 2) logits", normal);
  if (small) {  // under the sanitizer: three inputs per shape
    if (f.empty()) f = check("normal(0, 2) logits", normal, 3);
    if (f.empty()) f = check("-inf, NaN and +inf", special_values(rows, vocab));
    return f;
  }
  if (f.empty())
    f = check("whole-number logits in [-4, 4] (ties)", kl::integer_floats(n, -4, 4, kl::seed_for(seed + 1)));
  if (f.empty()) {
    auto rising = kl::normal_floats(n, 0, 0.5, kl::seed_for(seed + 2)), falling = rising;
    for (std::size_t i = 0; i < n; ++i) {
      rising[i] += static_cast<float>(i % vocab) * 0.01f;
      falling[i] -= static_cast<float>(i % vocab) * 0.01f;
    }
    f = check("rising rows (the best logits last)", rising);
    if (f.empty()) f = check("falling rows (the best logits first)", falling);
  }
  if (f.empty()) f = check("normal(1e4, 2) logits", kl::normal_floats(n, 1e4, 2, kl::seed_for(seed + 3)));
  if (f.empty()) f = check("normal(0, 1e29) logits", kl::normal_floats(n, 0, 1e29, kl::seed_for(seed + 4)));
  for (int offset : {1, 3})
    if (f.empty()) f = check("normal(0, 2) logits", normal, offset);
  if (f.empty() && rows >= 8) f = check("-inf, NaN and +inf", special_values(rows, vocab));
  return f;
}

// All list lengths, all row lengths. kernel_for(std::integral_constant<int, KC>{}) gives the kernel
// compiled for lists of KC: the test cases pass a lambda that names the kernel template.
template <class KernelFor>
kl::grade::Failure check_topk(KernelFor kernel_for) {
  const std::vector<int> vocabs = kl::grade::sanitized()
                                      ? std::vector<int>{1, 5, 33, 1000}
                                      : std::vector<int>{1, 2, 3, 5, 7, 31, 33, 100, 1000, 4097, 50257};
  const auto for_list = [&](auto kc) {
    kl::grade::Failure f;
    for (int vocab : vocabs)
      if (f.empty() && (kc() == 16 ? 10 : kc()) <= vocab) f = check_vocab(kernel_for(kc), kc(), vocab);
    return f;
  };
  kl::grade::Failure f = for_list(std::integral_constant<int, 1>{});
  if (f.empty()) f = for_list(std::integral_constant<int, 5>{});
  if (f.empty()) f = for_list(std::integral_constant<int, 16>{});
  if (f.empty()) f = for_list(std::integral_constant<int, 32>{});
  return f;
}

// Times `mine` against the solution at 4096 rows of 50257 normal(0, 2) logits, k = 10 in lists of
// 16: lesson 05's default shape, which results/h100/lesson05.csv times for every step; then the
// probabilities and indices `mine` gives there against the solution's.
kl::grade::Speed race_topk(TopkKernel mine, TopkKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::int64_t rows = 4096;
  const int vocab = 50257, k = 10;
  const kl::DeviceBuffer<float> x(kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(51)));
  kl::DeviceBuffer<float> prob(rows * k);
  kl::DeviceBuffer<int> idx(rows * k);
  const auto with = [&](TopkKernel kern) {
    return [&, kern](cudaStream_t s) { enqueue_topk(kern, x.data(), rows, vocab, k, prob.data(), idx.data(), s); };
  };
  return kl::grade::race(with(mine), with(solution), [&] {
    kl::grade::Failure f = kl::grade::same_as_solution(with(mine), with(solution), prob, 1e-5, 1e-7);
    if (f.empty()) f = kl::grade::same_as_solution(with(mine), with(solution), idx, 0, 0);
    return f.empty() ? f : "rows = 4096, V = 50257, k = 10: " + f;
  });
}

// Exercise 05.3 on rows of 1 to 256 logits (groups of 1 to 32 lanes), 1, 7 and 333 rows (the last warp
// part-filled), k = 1, 2, 5 and 8 (lists of 1, 2 and 8): normal logits, ties, and -inf, NaN and +inf.
template <class KernelFor>
kl::grade::Failure check_lanes(KernelFor kernel_for) {
  const bool small = kl::grade::sanitized();
  const std::vector<int> vocabs = small ? std::vector<int>{1, 8, 9, 64}
                                        : std::vector<int>{1, 2, 3, 5, 8, 9, 16, 31, 33, 64, 100, 128, 256};
  const std::vector<std::int64_t> row_counts = small ? std::vector<std::int64_t>{7} : std::vector<std::int64_t>{1, 7, 333};
  kl::grade::Failure f;
  const auto for_list = [&](auto kc, int k) {
    for (int vocab : vocabs)
      for (std::int64_t rows : row_counts) {
        if (!f.empty() || k > vocab) continue;
        const auto n = static_cast<std::size_t>(rows * vocab);
        const auto seed = static_cast<std::uint64_t>(vocab) * 1000 + static_cast<std::uint64_t>(rows) * 8 + k;
        const Launch launch = lanes_launch(kernel_for(kc));
        const auto check = [&](const std::string& what, const std::vector<float>& x) {
          return check_one(launch, what, x, rows, vocab, k, kc());
        };
        f = check("normal(0, 2) logits", kl::normal_floats(n, 0, 2, kl::seed_for(seed)));
        if (f.empty() && !small) f = check("whole-number logits in [-2, 2] (ties)", kl::integer_floats(n, -2, 2, kl::seed_for(seed + 1)));
        if (f.empty() && rows >= 7 && vocab >= 2) f = check("-inf, NaN and +inf", special_values(rows, vocab));
      }
  };
  for_list(std::integral_constant<int, 1>{}, 1);
  for_list(std::integral_constant<int, 2>{}, 2);
  for_list(std::integral_constant<int, 8>{}, 5);
  for_list(std::integral_constant<int, 8>{}, 8);
  return f;
}

kl::grade::Speed race_lanes(LanesKernel mine, LanesKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::int64_t rows = 65536;
  const int vocab = 8, k = 2;
  const kl::DeviceBuffer<float> x(kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(53)));
  kl::DeviceBuffer<float> prob(rows * k);
  kl::DeviceBuffer<int> idx(rows * k);
  const auto with = [&](LanesKernel kern) {
    return [&, kern](cudaStream_t s) { enqueue_lanes(kern, x.data(), rows, vocab, k, prob.data(), idx.data(), s); };
  };
  return kl::grade::race(with(mine), with(solution), [&] {
    kl::grade::Failure f = kl::grade::same_as_solution(with(mine), with(solution), prob, 1e-5, 1e-7);
    if (f.empty()) f = kl::grade::same_as_solution(with(mine), with(solution), idx, 0, 0);
    return f.empty() ? f : "rows = 65536, V = 8, k = 2: " + f;
  });
}

// The kernels of each set by list length, for check_topk and check_lanes.
const auto graded_insert = [](auto kc) -> TopkKernel { return graded::topk_warp_per_row<decltype(kc)::value>; };
const auto graded_vector = [](auto kc) -> TopkKernel { return graded::topk_warp_vector<decltype(kc)::value>; };
const auto max_only_insert = [](auto kc) -> TopkKernel { return max_only::topk_warp_per_row<decltype(kc)::value>; };
const auto runtime_slot_insert = [](auto kc) -> TopkKernel {
  return runtime_slot::topk_warp_per_row<decltype(kc)::value>;
};
const auto scalar_loop_vector = [](auto kc) -> TopkKernel {
  return scalar_loop::topk_warp_vector<decltype(kc)::value>;
};
const auto packs_only_vector = [](auto kc) -> TopkKernel { return packs_only::topk_warp_vector<decltype(kc)::value>; };
const auto graded_lanes = [](auto kc) -> LanesKernel { return graded::topk_lanes_per_row<decltype(kc)::value>; };
const auto whole_warp_lanes = [](auto kc) -> LanesKernel { return whole_warp::topk_lanes_per_row<decltype(kc)::value>; };

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 05.1: the register top-K insertion in step 2's warp per row") {
    kl::grade::verdict("05.1", check_topk(graded_insert),
                       race_topk(graded::topk_warp_per_row<16>, solution::topk_warp_per_row<16>));
  }

  TEST_CASE("exercise 05.2: step 3, 16-byte loads and an early reject") {
    kl::grade::verdict("05.2", check_topk(graded_vector),
                       race_topk(graded::topk_warp_vector<16>, solution::topk_warp_vector<16>));
  }

  TEST_CASE("exercise 05.3: step 7's group of lanes per row, its (m, s) and its winners") {
    kl::grade::verdict("05.3", check_lanes(graded_lanes),
                       race_lanes(graded::topk_lanes_per_row<2>, solution::topk_lanes_per_row<2>));
  }

  TEST_CASE("wrong 05.3: a warp's butterflies on smaller groups mix the rows") {
    kl::grade::wrong_variant("05.3", "whole_warp", kl::grade::Fails::check, check_lanes(whole_warp_lanes),
                             race_lanes(whole_warp::topk_lanes_per_row<2>, solution::topk_lanes_per_row<2>));
  }

  TEST_CASE("wrong 05.1: keeping only the maximum is right for k = 1 only") {
    kl::grade::wrong_variant("05.1", "max_only", kl::grade::Fails::check, check_topk(max_only_insert),
                             race_topk(max_only::topk_warp_per_row<16>, solution::topk_warp_per_row<16>));
  }

  TEST_CASE("wrong 05.1: a slot found at run time moves the list to local memory") {
    kl::grade::wrong_variant("05.1", "runtime_slot", kl::grade::Fails::speed, check_topk(runtime_slot_insert),
                             race_topk(runtime_slot::topk_warp_per_row<16>, solution::topk_warp_per_row<16>));
  }

  TEST_CASE("wrong 05.2: step 2's scalar loop, an insertion per logit, is too slow") {
    kl::grade::wrong_variant("05.2", "scalar_loop", kl::grade::Fails::speed, check_topk(scalar_loop_vector),
                             race_topk(scalar_loop::topk_warp_vector<16>, solution::topk_warp_vector<16>));
  }

  TEST_CASE("wrong 05.2: packs without the head and the tail lose logits") {
    kl::grade::wrong_variant("05.2", "packs_only", kl::grade::Fails::check, check_topk(packs_only_vector),
                             race_topk(packs_only::topk_warp_vector<16>, solution::topk_warp_vector<16>));
  }
}
