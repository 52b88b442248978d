// The checks every reduction lesson (01-03) runs on its whole step table, called from the
// lessons' doctest cases. Outputs are poisoned before each run, so an unwritten result fails.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/sum_lesson.cuh"

namespace kl::sum_checks {

// The step table (a CPU check): unique names, a launcher for each, one library baseline, last; no
// step needs a newer GPU than any; --list says which steps end in float atomics (not deterministic).
inline void step_table(const std::vector<SumStep>& steps) {
  std::set<std::string> names;
  int library = 0;
  for (const SumStep& st : steps) {
    CAPTURE(st.name);
    CHECK(names.insert(st.name).second);
    CHECK((st.launch.fn != nullptr));
    CHECK(st.needs_sm == 0);
    CHECK(st.part == nullptr);
    CHECK((std::string(st.idea).find("float atomics") == std::string::npos) == st.launch.deterministic);
    library += st.library;
  }
  CHECK(library == 1);
  CHECK(steps.back().library);
}

// The foundation's sizes: tiny, around a warp, awkward, a prime near 10^6, 2^24 and 2^28.
inline std::vector<std::size_t> sizes() {
  if (sanitizing()) return {1, 2, 31, 33, 1000, 4097, 70001};
  return {1, 2, 31, 32, 33, 1000, 4097, 999983, std::size_t{1} << 24, std::size_t{1} << 28};
}

// One run of a launcher on the legacy stream, its output poisoned first (0xFF: NaN; 0x7F: finite).
// A scratch passed in is reused (as in timed repetitions); otherwise a fresh one is used.
inline float run(SumLauncher launch, const float* x, std::size_t n, int poison = 0xFF, Scratch* keep = nullptr) {
  DeviceBuffer<float> out(1);
  Scratch fresh;
  out.poison(poison);
  launch(x, n, out.data(), keep ? *keep : fresh, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

// `data` placed `offset` floats into a device buffer whose other floats are NaN: a step that reads
// outside [x, x + n) returns NaN, and x + offset is 4 * offset bytes past a 16-byte boundary.
inline DeviceBuffer<float> padded(const std::vector<float>& data, std::size_t offset) {
  std::vector<float> host(data.size() + offset + 4, NAN);
  std::copy(data.begin(), data.end(), host.begin() + offset);
  return DeviceBuffer<float>(host);
}

// Whole numbers in [-4, 4]: every order of addition is exact, so every step must match bit for bit.
inline void whole_numbers_exact(const std::vector<SumStep>& steps) {
  for (std::size_t n : sizes()) {
    const auto host = integer_floats(n, -4, 4, seed_for(n));
    const double exact = ref_sum(host.data(), n).sum;
    const DeviceBuffer<float> x(host);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string step = steps[i].name;
      CAPTURE(n);
      CAPTURE(step);
      if (runs_whole(steps[i], n)) CHECK(run(steps[i].launch.fn, x.data(), n) == exact);
    }
  }
}

// Real values (uniform, and normal with huge magnitudes) within the sqrt(n) rounding tolerance.
inline void real_values_within_tolerance(const std::vector<SumStep>& steps) {
  for (std::size_t n : sizes()) {
    if (n > (std::size_t{1} << 24)) continue;
    for (int dist = 0; dist < 2; ++dist) {
      const auto host =
          dist == 0 ? uniform_floats(n, -1, 1, seed_for(n + 7)) : normal_floats(n, 3.0, 1e30, seed_for(n + 8));
      const SumRef ref = ref_sum(host.data(), n);
      const DeviceBuffer<float> x(host);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const std::string step = steps[i].name;
        CAPTURE(n);
        CAPTURE(dist);
        CAPTURE(step);
        if (runs_whole(steps[i], n)) CHECK(sum_close(run(steps[i].launch.fn, x.data(), n), ref, n));
      }
    }
  }
}

// x + 1 .. x + 3: every float read once (exact whole-number sums), none outside (NaN padding).
inline void unaligned_pointers(const std::vector<SumStep>& steps) {
  std::vector<std::size_t> ns = {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 1000, 4097, 70001};
  if (!sanitizing()) ns.push_back(999983);
  for (std::size_t n : ns) {
    const auto host = integer_floats(n, -4, 4, seed_for(n + 11));
    const double exact = ref_sum(host.data(), n).sum;
    for (std::size_t offset = 1; offset < 4; ++offset) {
      const DeviceBuffer<float> x = padded(host, offset);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const std::string step = steps[i].name;
        CAPTURE(n);
        CAPTURE(offset);
        CAPTURE(step);
        CHECK(run(steps[i].launch.fn, x.data() + offset, n) == exact);
      }
    }
  }
}

// n = 0: the sum is 0, written, with no invalid launch, whatever the alignment.
inline void empty_input(const std::vector<SumStep>& steps) {
  const DeviceBuffer<float> x(4);
  for (std::size_t offset = 0; offset < 4; ++offset) {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string step = steps[i].name;
      CAPTURE(offset);
      CAPTURE(step);
      CHECK(run(steps[i].launch.fn, x.data() + offset, 0) == 0.0f);
    }
  }
}

// NaN anywhere gives NaN; +-inf gives +-inf; +inf with -inf gives NaN; at the start, middle and end
// (the scalar head and tail of the vector steps), aligned or not. The poison is finite, so an
// unwritten output cannot pass as NaN.
inline void special_values(const std::vector<SumStep>& steps) {
  const std::size_t n = 100003;
  const auto base = uniform_floats(n, -1, 1, seed_for(3));
  struct Case {
    float a, b;
  } cases[] = {{NAN, 0.f}, {INFINITY, 1.f}, {-INFINITY, 1.f}, {INFINITY, -INFINITY}};
  for (const auto& c : cases) {
    for (std::size_t at : {std::size_t{0}, std::size_t{12345}, n - 1}) {
      auto host = base;
      host[at] = c.a;
      host[(at + n / 2) % n] = c.b;
      const double ref = ref_sum(host.data(), n).sum;
      for (std::size_t offset : {0, 1}) {
        const DeviceBuffer<float> x = padded(host, offset);
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const std::string step = steps[i].name;
          CAPTURE(step);
          CAPTURE(c.a);
          CAPTURE(c.b);
          CAPTURE(at);
          CAPTURE(offset);
          const float got = run(steps[i].launch.fn, x.data() + offset, n, 0x7F);
          if (std::isnan(ref)) CHECK(std::isnan(got));
          else CHECK(got == ref);
        }
      }
    }
  }
}

// 2^28 values of 1e30: the sum, 2.68e38, is 79 % of FLT_MAX; no step may overflow on the way.
// A step with one accumulator stalls at exactly 2^124 = 2.13e37, 12.6x too small: from there 1e30
// is less than half an ulp of the sum and every addition rounds back down. The others must be right.
// A step that never runs 2^28 values (most_n) is left out.
inline void large_magnitudes(const std::vector<SumStep>& steps) {
  if (sanitizing()) return;  // 1 GiB: too slow under compute-sanitizer
  const std::size_t n = std::size_t{1} << 28;
  const std::vector<float> host(n, 1e30f);
  const SumRef ref = ref_sum(host.data(), n);
  const DeviceBuffer<float> x(host);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!runs_whole(steps[i], n)) continue;
    const std::string step = steps[i].name;
    CAPTURE(step);
    const float got = run(steps[i].launch.fn, x.data(), n);
    CHECK(std::isfinite(got));
    if (steps[i].launch.one_accumulator) CHECK(got == std::ldexp(1.0f, 124));
    else CHECK(sum_close(got, ref, n));
  }
}

// Steps marked deterministic give the same bits on every run, with a fresh scratch or a reused one.
inline void deterministic_steps(const std::vector<SumStep>& steps) {
  const std::size_t n = 999983;
  const DeviceBuffer<float> x(uniform_floats(n, -1, 1, seed_for(4)));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].launch.deterministic) continue;
    const std::string step = steps[i].name;
    CAPTURE(step);
    const float first = run(steps[i].launch.fn, x.data(), n);
    Scratch reused;
    for (int r = 0; r < 5; ++r) CHECK(run(steps[i].launch.fn, x.data(), n, 0xFF, &reused) == first);
  }
}

// Short steps are timed by CUDA-graph replay: every launcher must capture (no sync, no allocation
// after its first run) and give the right sum on every replay (its memsets and counters reset).
inline void graph_replay(const std::vector<SumStep>& steps) {
  const std::size_t n = 70001;
  const auto host = integer_floats(n, -4, 4, seed_for(5));
  const double exact = ref_sum(host.data(), n).sum;
  const DeviceBuffer<float> x = padded(host, 1);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string step = steps[i].name;
    CAPTURE(step);
    DeviceBuffer<float> out(1);
    Scratch scratch;
    steps[i].launch(x.data() + 1, n, out.data(), scratch, stream);  // first run: scratch allocated here
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const cudaGraphExec_t exec =
        capture_graph(stream, [&](cudaStream_t s) { steps[i].launch(x.data() + 1, n, out.data(), scratch, s); });
    for (int replay = 0; replay < 3; ++replay) {
      out.poison();
      CUDA_CHECK(cudaGraphLaunch(exec, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CHECK(out.download(1)[0] == exact);
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Every check above, each a doctest subcase: what each reduction lesson's GPU suite starts with.
inline void all(const std::vector<SumStep>& steps) {
  SUBCASE("whole numbers sum exactly, at every size") { whole_numbers_exact(steps); }
  SUBCASE("real values within the float64 tolerance") { real_values_within_tolerance(steps); }
  SUBCASE("unaligned base pointers x+1..x+3") { unaligned_pointers(steps); }
  SUBCASE("n = 0") { empty_input(steps); }
  SUBCASE("NaN and infinities") { special_values(steps); }
  SUBCASE("2^28 values of 1e30") { large_magnitudes(steps); }
  SUBCASE("deterministic steps") { deterministic_steps(steps); }
  SUBCASE("CUDA-graph replay") { graph_replay(steps); }
}

}  // namespace kl::sum_checks
