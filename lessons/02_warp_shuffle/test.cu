// Lesson 02 checks: the CPU cases test the step table, the grid size and the float4 split of an
// arbitrary pointer; the "gpu" suite runs every step of the table on fresh inputs with a poisoned
// output, from unaligned pointers, on special values, and captured in a CUDA graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/02_warp_shuffle/reduce.cuh"

using lesson02::kSteps;

namespace {

bool sanitizing() { return std::getenv("KL_SANITIZE") != nullptr; }

// Sizes from the foundation's list; KL_SANITIZE=1 (compute-sanitizer runs) keeps only small ones.
std::vector<std::size_t> test_sizes() {
  if (sanitizing()) return {1, 2, 31, 33, 1000, 4097, 70001};
  return {1, 2, 31, 32, 33, 1000, 4097, 999983, std::size_t{1} << 24, std::size_t{1} << 28};
}

float run_step(const kl::SumStep& st, const float* x, std::size_t n, int poison = 0xFF) {
  kl::DeviceBuffer<float> out(1);
  kl::Scratch scratch;
  out.poison(poison);
  st.launch(x, n, out.data(), scratch, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

// `data` placed `offset` floats into a device buffer whose other floats are NaN: a step that reads
// outside [x, x + n) returns NaN, and x + offset is 4 * offset bytes past a 16-byte boundary.
kl::DeviceBuffer<float> padded(const std::vector<float>& data, std::size_t offset) {
  std::vector<float> host(data.size() + offset + 4, NAN);
  std::copy(data.begin(), data.end(), host.begin() + offset);
  return kl::DeviceBuffer<float>(host);
}

}  // namespace

TEST_CASE("the step table: unique names, lesson 01's best first, one library baseline last") {
  std::set<std::string> names;
  int library = 0;
  for (const auto& st : kSteps) {
    CHECK(names.insert(st.name).second);
    CHECK((st.launch != nullptr));
    library += st.library;
  }
  CHECK(library == 1);
  CHECK(kSteps[std::size(kSteps) - 1].library);
  CHECK((kSteps[0].launch == lesson01::launch_block_atomic));  // reused, not copied
}

TEST_CASE("only the library is deterministic: every other step ends in float atomics") {
  for (const auto& st : kSteps) {
    CAPTURE(st.name);
    CHECK(st.deterministic == st.library);
  }
}

TEST_CASE("blocks_for: fills the GPU, never more blocks than the data needs, at least one") {
  const int sms = 132;
  const std::size_t full = sms * lesson02::kBlocksPerSm;
  for (std::size_t per_thread : {1, 4, 16}) {
    const std::size_t per_block = lesson02::kBlock * per_thread;
    CAPTURE(per_thread);
    CHECK(lesson02::blocks_for(0, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(1, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(per_block, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(per_block + 1, per_thread, sms) == 2);
    CHECK(lesson02::blocks_for(10 * per_block, per_thread, sms) == 10);
    CHECK(lesson02::blocks_for(std::size_t{1} << 28, per_thread, sms) == full);
  }
}

TEST_CASE("float4_view splits any float pointer into head + aligned float4 middle + tail") {
  alignas(16) static float buf[64];
  for (std::size_t offset = 0; offset < 4; ++offset) {
    for (std::size_t n = 0; n <= 40; ++n) {
      CAPTURE(offset);
      CAPTURE(n);
      const lesson02::Float4View v = lesson02::float4_view(buf + offset, n);
      CHECK(v.head + 4 * v.nvec + v.tail == n);
      CHECK(v.head == std::min<std::size_t>(n, (4 - offset) % 4));
      CHECK(v.tail < 4);
      if (v.nvec > 0) CHECK(reinterpret_cast<std::uintptr_t>(v.vec) % 16 == 0);  // else never read
      CHECK(reinterpret_cast<const float*>(v.vec) == buf + offset + v.head);
    }
  }
}

TEST_CASE("premise of the large-magnitude case: 2^28 x 1e30 is finite in float, 79% of FLT_MAX") {
  const double sum = std::ldexp(static_cast<double>(1e30f), 28);
  CHECK(std::isfinite(static_cast<float>(sum)));
  CHECK(sum / FLT_MAX == doctest::Approx(0.789).epsilon(0.001));
}

TEST_SUITE("gpu") {
  TEST_CASE("every step sums whole numbers exactly, at every size") {
    for (std::size_t n : test_sizes()) {
      const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(n));
      const double exact = kl::ref_sum(host.data(), n).sum;
      const kl::DeviceBuffer<float> x(host);
      for (const auto& st : kSteps) {
        CAPTURE(n);
        CAPTURE(st.name);
        CHECK(run_step(st, x.data(), n) == exact);
      }
    }
  }

  TEST_CASE("every step matches the float64 sum of real-valued data within tolerance") {
    for (std::size_t n : test_sizes()) {
      for (int dist = 0; dist < 2; ++dist) {
        if (dist == 1 && n > (std::size_t{1} << 24)) continue;
        const auto host = dist == 0 ? kl::uniform_floats(n, -1, 1, kl::seed_for(n + 7))
                                    : kl::normal_floats(n, 3.0, 1e30, kl::seed_for(n + 8));  // huge magnitudes
        const kl::SumRef ref = kl::ref_sum(host.data(), n);
        const kl::DeviceBuffer<float> x(host);
        for (const auto& st : kSteps) {
          CAPTURE(n);
          CAPTURE(dist);
          CAPTURE(st.name);
          CHECK(kl::sum_close(run_step(st, x.data(), n), ref, n));
        }
      }
    }
  }

  TEST_CASE("unaligned base pointers (x + 1 .. x + 3): every float read once, none outside") {
    std::vector<std::size_t> sizes = {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 1000, 4097, 70001};
    if (!sanitizing()) sizes.push_back(999983);
    for (std::size_t n : sizes) {
      const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(n + 11));
      const double exact = kl::ref_sum(host.data(), n).sum;
      for (std::size_t offset = 1; offset < 4; ++offset) {
        const kl::DeviceBuffer<float> x = padded(host, offset);
        for (const auto& st : kSteps) {
          CAPTURE(n);
          CAPTURE(offset);
          CAPTURE(st.name);
          CHECK(run_step(st, x.data() + offset, n) == exact);
        }
      }
    }
  }

  TEST_CASE("n = 0 sums to 0 without a launch error, aligned or not") {
    const kl::DeviceBuffer<float> x(4);
    for (std::size_t offset = 0; offset < 4; ++offset) {
      for (const auto& st : kSteps) {
        CAPTURE(offset);
        CAPTURE(st.name);
        CHECK(run_step(st, x.data() + offset, 0) == 0.0f);
      }
    }
  }

  TEST_CASE("special values in the head, the middle and the tail: NaN propagates, +-inf") {
    const std::size_t n = 100003;
    const auto base = kl::uniform_floats(n, -1, 1, kl::seed_for(3));
    struct Case { float a, b; } cases[] = {{NAN, 0.f}, {INFINITY, 1.f}, {-INFINITY, 1.f}, {INFINITY, -INFINITY}};
    for (const auto& c : cases) {
      for (std::size_t at : {std::size_t{0}, std::size_t{12345}, n - 1}) {
        auto host = base;
        host[at] = c.a;
        host[(at + n / 2) % n] = c.b;
        const double ref = kl::ref_sum(host.data(), n).sum;
        for (std::size_t offset : {0, 1}) {
          const kl::DeviceBuffer<float> x = padded(host, offset);
          for (const auto& st : kSteps) {
            CAPTURE(st.name);
            CAPTURE(c.a);
            CAPTURE(c.b);
            CAPTURE(at);
            CAPTURE(offset);
            const float got = run_step(st, x.data() + offset, n, 0x7F);  // finite poison: an unwritten NaN fails
            if (std::isnan(ref)) CHECK(std::isnan(got));
            else CHECK(got == ref);
          }
        }
      }
    }
  }

  TEST_CASE("large magnitude: 2^28 values of 1e30 sum to 2.68e38 without overflow") {
    if (sanitizing()) return;  // 1 GiB: too slow under compute-sanitizer
    const std::size_t n = std::size_t{1} << 28;
    const std::vector<float> host(n, 1e30f);
    const kl::SumRef ref = kl::ref_sum(host.data(), n);
    const kl::DeviceBuffer<float> x(host);
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      const float got = run_step(st, x.data(), n);
      CHECK(std::isfinite(got));
      CHECK(kl::sum_close(got, ref, n));
    }
  }

  TEST_CASE("deterministic steps give the same bits every run") {
    const std::size_t n = 999983;
    const auto host = kl::uniform_floats(n, -1, 1, kl::seed_for(4));
    const kl::DeviceBuffer<float> x(host);
    for (const auto& st : kSteps) {
      if (!st.deterministic) continue;
      CAPTURE(st.name);
      CHECK(run_step(st, x.data(), n) == run_step(st, x.data(), n));
    }
  }

  TEST_CASE("every launcher can be captured in a CUDA graph and replayed (how short steps are timed)") {
    const std::size_t n = 70001;
    const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(5));
    const double exact = kl::ref_sum(host.data(), n).sum;
    const kl::DeviceBuffer<float> x = padded(host, 1);
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      kl::DeviceBuffer<float> out(1);
      kl::Scratch scratch;
      st.launch(x.data() + 1, n, out.data(), scratch, stream);  // untimed first run: scratch allocated here
      CUDA_CHECK(cudaStreamSynchronize(stream));
      out.poison();
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      st.launch(x.data() + 1, n, out.data(), scratch, stream);
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 2; ++replay) {  // twice: the memset inside must reset the result
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CHECK(out.download(1)[0] == exact);
      }
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}
