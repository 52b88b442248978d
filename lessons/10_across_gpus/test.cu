// Lesson 10 checks: the CPU cases test the step table, the chunks, the ring's schedule (played on
// paper), the bandwidth formulas and the --gpus rules; the "gpu" suite runs every step on every GPU of
// a group of 2 or more against a float64 sum (awkward sizes, 1 element, NaN and infinities, the same bits
// on every GPU, a second launch, a CUDA graph), and with one GPU checks that the lesson says n/a and exits 0.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "lessons/10_across_gpus/host.cuh"
#include "lessons/10_across_gpus/ring_check.hpp"

using lesson10::kSteps;

namespace {

// lesson10 with these arguments, as main() runs it: its exit code.
int run_main(std::vector<std::string> args) {
  args.insert(args.begin(), "lesson10");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return kl::run_lesson(lesson10::lesson(), static_cast<int>(argv.size()), argv.data());
}

// The order of the ring reversed: GPU me sends chunk me + t, not me - t.
struct WrongDirection {
  __host__ __device__ static int chunk(int me, int t, int gpus) { return (me + t) % gpus; }
  __host__ __device__ static lesson10::Role role(int t, int gpus) { return lesson10::RingSchedule::role(t, gpus); }
};

}  // namespace

TEST_CASE("the step table: unique names, the ladder in order, NCCL last as the library row") {
  std::set<std::string> names;
  for (const auto& st : kSteps) CHECK(names.insert(st.name).second);
  REQUIRE(kSteps.size() == 5);
  CHECK(std::string(kSteps[0].name) == "through_host");
  CHECK(std::string(kSteps[3].name) == "ring");
  CHECK(kSteps.back().library);
  for (std::size_t i = 0; i + 1 < kSteps.size(); ++i) CHECK_FALSE(kSteps[i].library);
}

TEST_CASE("chunks: G of them cover [0, n) in order, each starting on 16 bytes; short or empty ones last") {
  for (std::size_t n : {1, 2, 3, 4, 5, 7, 8, 31, 1000, 4097, 1000003})
    for (int gpus = 1; gpus <= lesson10::kMaxGpus; ++gpus) {
      CAPTURE(n);
      CAPTURE(gpus);
      std::size_t next = 0;
      for (int c = 0; c < gpus; ++c) {
        const lesson10::Range r = lesson10::chunk_range(n, gpus, c);
        CHECK(r.begin == next);
        CHECK(r.end >= r.begin);
        CHECK((r.begin % 4 == 0 || r.begin == n));
        CHECK(r.end - r.begin <= lesson10::chunk_len(n, gpus));
        next = r.end;
      }
      CHECK(next == n);
    }
}

TEST_CASE("the ring's schedule: GPU g sends chunk (g - t) mod G at step t, in the roles of the two phases") {
  using S = lesson10::RingSchedule;
  using lesson10::Role;
  const int want[6][4] = {{0, 1, 2, 3}, {3, 0, 1, 2}, {2, 3, 0, 1}, {1, 2, 3, 0}, {0, 1, 2, 3}, {3, 0, 1, 2}};
  for (int t = 0; t < 6; ++t)
    for (int g = 0; g < 4; ++g) CHECK(S::chunk(g, t, 4) == want[t][g]);
  const Role roles[6] = {Role::send_own, Role::add_send, Role::add_send, Role::add_keep, Role::forward, Role::forward};
  for (int t = 0; t < 6; ++t) CHECK(S::role(t, 4) == roles[t]);
  CHECK(S::role(0, 2) == Role::send_own);
  CHECK(S::role(1, 2) == Role::add_keep);
  for (int gpus = 2; gpus <= lesson10::kMaxGpus; ++gpus) {
    CAPTURE(gpus);
    CHECK(lesson10::simulate_ring<S>(gpus) == "");
  }
}

TEST_CASE("the ring played on paper catches a ring turned the wrong way (from G = 3; at G = 2 both agree)") {
  CHECK(lesson10::simulate_ring<WrongDirection>(2) == "");
  for (int gpus = 3; gpus <= lesson10::kMaxGpus; ++gpus) {
    CAPTURE(gpus);
    CHECK(lesson10::simulate_ring<WrongDirection>(gpus) != "");
  }
}

TEST_CASE("the ring's slices: whole 4 KiB pages covering a chunk, at most 2 blocks per SM, none idle") {
  for (std::size_t n : std::vector<std::size_t>{1, 5, 4097, 1000003, std::size_t{1} << 26, std::size_t{1} << 28})
    for (int gpus : {2, 3, 8})
      for (int sms : {40, 132}) {
        const lesson10::RingGrid grid = lesson10::ring_grid(n, gpus, sms);
        CAPTURE(n);
        CAPTURE(gpus);
        CHECK(grid.slice % 1024 == 0);
        CHECK(grid.slice * grid.slices >= lesson10::chunk_len(n, gpus));
        CHECK((grid.slices - 1) * grid.slice < lesson10::chunk_len(n, gpus));
        CHECK(grid.blocks >= 1);
        CHECK(grid.blocks <= 2 * sms);
        CHECK(static_cast<std::size_t>(grid.blocks) <= grid.slices);
      }
}

TEST_CASE("bandwidth: algbw = bytes / time, bus bandwidth = algbw * 2 (G-1) / G") {
  CHECK(lesson10::bus_factor(2) == 1.0);
  CHECK(lesson10::bus_factor(4) == 1.5);
  CHECK(lesson10::bus_factor(8) == 1.75);
  CHECK(lesson10::algbw_gbps(1e9, 10.0) == doctest::Approx(100.0));
  CHECK(lesson10::busbw_gbps(1e9, 10.0, 8) == doctest::Approx(175.0));
  // A row's GB/s column is the bus bandwidth: its bytes are 4n * 2 (G-1) / G.
  kl::Row r;
  r.bytes = 4.0 * 1000 * lesson10::bus_factor(4);
  r.ms.median = 1e-3;
  CHECK(r.gbps() == doctest::Approx(lesson10::busbw_gbps(4000.0, 1e-3, 4)));
}

TEST_CASE("--gpus: at most the GPUs visible and 8; default every visible GPU; 1 GPU: every step n/a") {
  CHECK(lesson10::choose_gpus(std::nullopt, 2) == 2);
  CHECK(lesson10::choose_gpus(std::nullopt, 1) == 1);
  CHECK(lesson10::choose_gpus(std::nullopt, 16) == 8);
  CHECK(lesson10::choose_gpus(2, 2) == 2);
  CHECK(lesson10::choose_gpus(3, 0) == 3);  // no count (no GPU): the driver ends with exit 77 later
  CHECK_THROWS_AS(lesson10::choose_gpus(3, 2), kl::UsageError);
  CHECK_THROWS_AS(lesson10::choose_gpus(9, 16), kl::UsageError);
  CHECK(lesson10::group_missing(1, 1) == "needs 2 GPUs (1 visible)");
  CHECK(lesson10::group_missing(1, 2) == "needs 2 GPUs (1 chosen of 2 visible)");
  CHECK(lesson10::group_missing(2, 2) == "");
  CHECK(run_main({"--gpus", "0", "--list"}) == 2);
  CHECK(run_main({"--gpus", "two", "--list"}) == 2);
  CHECK(run_main({"--gpus", "9", "--list"}) == 2);
  CHECK(run_main({"--gpus", "1", "--list"}) == 0);
  CHECK(run_main({"--list"}) == 0);
}

TEST_SUITE("gpu") {
  namespace {

  // Step 2's cudaMemcpyPeerAsync cannot be captured into a CUDA graph; the kernels and NCCL can (the
  // lesson itself times without graphs: host.cuh).
  bool capturable(const lesson10::AllReduceStep& st) { return std::string(st.name) != "peer_copies"; }

  // Step `st` on a group of `gpus` GPUs with the given inputs: launched on a stream of GPU 0 (twice, or
  // by a CUDA graph), then every GPU's output checked against the float64 sum.
  void check_step(const lesson10::AllReduceStep& st, int gpus, const std::vector<std::vector<float>>& inputs,
                  bool graph) {
    const std::size_t n = inputs[0].size();
    CAPTURE(st.name);
    CAPTURE(gpus);
    CAPTURE(n);
    CAPTURE(graph);
    // Under compute-sanitizer (KL_SANITIZE=1) the checks are for our kernels: NCCL's own kernels and
    // set-up trip synccheck (divergent barriers by design) and memcheck's API-error reports.
    if (st.library && kl::sanitizing()) return;
    lesson10::GroupOwner owner(gpus, n);
    lesson10::Group& g = owner.g;
    const lesson10::Reference ref = lesson10::upload_inputs(g, inputs);
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const auto launch = [&](cudaStream_t on) { st.launch(g, on); };
    for (int run = 0; run < 2; ++run) {  // the second run: the ring's flags without a reset
      for (int h = 0; h < gpus; ++h) {
        lesson10::OnGpu on(h);
        CUDA_CHECK(cudaMemset(g.out[h], 0xFF, n * sizeof(float)));
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      try {
        if (graph && run == 1 && capturable(st)) kl::replay_once(s, launch);
        else launch(s);
      } catch (const kl::NotSupported& e) {
        MESSAGE(st.name << " n/a: " << e.what());
        break;
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      CHECK(lesson10::max_error(g, ref) <= lesson10::tolerance(gpus));
      if (st.library) continue;  // NCCL promises the sum, not how it adds
      std::vector<float> first(n), other(n);
      CUDA_CHECK(cudaMemcpy(first.data(), g.out[0], n * sizeof(float), cudaMemcpyDeviceToHost));
      for (int h = 1; h < gpus; ++h) {
        CUDA_CHECK(cudaMemcpy(other.data(), g.out[h], n * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK_MESSAGE(std::memcmp(first.data(), other.data(), n * sizeof(float)) == 0,
                      "GPU " << h << " holds other bits than GPU 0");
      }
    }
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  int group_or_skip() {
    const int visible = lesson10::visible_gpus();
    if (visible < 2) MESSAGE("skipped: " << lesson10::group_missing(visible, visible));
    return visible < lesson10::kMaxGpus ? visible : lesson10::kMaxGpus;
  }

  }  // namespace

  TEST_CASE("one GPU: every step n/a, exit 0") {
    if (lesson10::visible_gpus() != 1) return;
    CHECK(run_main({"--n", "4096"}) == 0);
    CHECK(run_main({"--n", "4096", "--gpus", "1"}) == 0);
  }

  TEST_CASE("every step, every GPU: awkward sizes, one element, magnitudes that show the order") {
    const int most = group_or_skip();
    if (most < 2) return;
    std::vector<std::size_t> sizes = {1, 3, 4, 5, 1023, 4097, 1000003};
    if (!kl::sanitizing()) sizes.push_back((std::size_t{1} << 24) + 13);
    for (int gpus = 2; gpus <= most; gpus = gpus < most && gpus * 2 > most ? most : gpus * 2)
      for (std::size_t n : sizes) {
        std::vector<std::vector<float>> inputs;
        for (int h = 0; h < gpus; ++h) inputs.push_back(lesson10::input_of(n, h, kl::seed_for(n + 10)));
        for (const auto& st : kSteps) check_step(st, gpus, inputs, false);
      }
  }

  TEST_CASE("NaN and infinities propagate on every GPU; a CUDA graph replays every step that can be captured") {
    const int most = group_or_skip();
    if (most < 2) return;
    const std::size_t n = 4099;
    std::vector<std::vector<float>> inputs;
    for (int h = 0; h < most; ++h) inputs.push_back(lesson10::input_of(n, h, kl::seed_for(11)));
    inputs[1][7] = NAN;       // NaN + anything
    inputs[0][3] = INFINITY;  // inf + finite
    inputs[0][5] = INFINITY;  // inf + -inf = NaN
    inputs[1][5] = -INFINITY;
    inputs[most - 1][n - 1] = -INFINITY;  // the last element, in the last chunk
    for (const auto& st : kSteps) check_step(st, most, inputs, true);
  }
}
