// Lesson 09 checks. CPU cases: the step table (what each step needs, where the Hopper steps sit, the
// labels), shape validation and the command-line shapes, the sweep. The "gpu" suite walks the whole
// table, so a new step is tested by its entry alone: every step on fresh f16 inputs, output poisoned,
// against the float64 reference of lesson 07 (host.cuh), at S = 1, 17, 64, 100, 128, 129 and 1000
// (tails that are no multiple of any tile, causal key tiles above the diagonal skipped), D = 64 and 128,
// causal and not; scores scaled by 1e3 (the row max must be subtracted); replay from a CUDA graph. A step
// that cannot run here (step 1 below sm_80, a Hopper step anywhere but on an sm_90 GPU) is n/a: reported
// with its reason, neither passed nor failed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/device.cuh"
#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/09_hopper_attention/attention.cuh"

using lesson09::kSteps;
using lesson09::Problem;

namespace {

using kl::sanitizing;

using Inputs = lesson07::HostQkv;  // Q, K, V rounded to f16 (lessons/07_wmma_attention/host.cuh)
using lesson07::DeviceQkvo;
using lesson07::test_inputs;
using lesson09::all_rows;

// A launcher refused its step (kl::NotSupported). The library may turn a shape down; a step of the
// lesson only for the code this process has for the GPU ("needs sm_80 ...", "needs sm_90a ..."), and then
// it is reported n/a, neither failed nor passed.
void refused(const lesson09::Step& st, const kl::NotSupported& e) {
  if (st.library) return;
  const std::string why = e.what();
  CHECK(st.needs_sm > 0);
  CHECK(why.rfind("needs sm_" + std::to_string(st.needs_sm) + (st.arch_specific ? "a" : ""), 0) == 0);
  MESSAGE("step " << st.name << " n/a: " << why);
}

// Every step of the table (or the one named `only`) on one problem against the float64 reference of every
// row, output poisoned.
void check_steps(Problem p, std::uint64_t seed, bool with_library = true, const char* only = nullptr) {
  const Inputs in = test_inputs(p, seed);
  const std::vector<double> ref = lesson09::reference(in.q, in.k, in.v, p);
  DeviceQkvo d(in);
  p = d.on(p);
  for (const auto& st : kSteps) {
    if ((st.library && !with_library) || (only && std::string(st.name) != only)) continue;
    const std::string step = st.name;
    CAPTURE(step);
    CAPTURE(p.batch);
    CAPTURE(p.heads);
    CAPTURE(p.seq);
    CAPTURE(p.dim);
    CAPTURE(p.causal);
    CAPTURE(p.scale);
    d.o.poison();
    lesson09::Workspace ws;
    try {
      lesson09::run_step(st, p, ws, nullptr);
    } catch (const kl::NotSupported& e) {
      refused(st, e);
      continue;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(lesson09::max_error(d.o.download(), ref, all_rows(p), p.dim) <= lesson09::kRel);
  }
}

Problem flash(std::int64_t b, int h, int s, int d, bool causal) { return lesson09::flash_problem(b, h, s, d, causal); }

// The options as the driver hands them to lesson09::shapes.
kl::Args args(const std::map<std::string, std::int64_t>& sizes, const std::map<std::string, std::string>& texts = {},
              bool causal = false) {
  kl::Args a;
  a.sizes = sizes;
  a.texts = texts;
  if (causal) a.flags["causal"] = true;
  return a;
}

}  // namespace

TEST_CASE("the step table: every step has a name, an idea, a launcher and what it needs; unique names") {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(kSteps.size()); ++i) {
    const auto& st = kSteps[i];
    CAPTURE(st.name);
    REQUIRE(st.name != nullptr);
    REQUIRE(st.idea != nullptr);
    CHECK(std::string(st.name).size() > 0);
    CHECK(std::string(st.idea).size() > 0);
    CHECK((st.launch != nullptr));
    CHECK(st.part == nullptr);  // one problem: no parts
    CHECK(names.insert(st.name).second);
    CHECK(kl::find_steps(kSteps, st.name) == std::vector<int>{i});  // --step NAME picks this step alone
    // needs: any GPU (library), sm_80 or newer (mma.sync, cp.async), or sm_90a (wgmma, setmaxnreg)
    CHECK((st.needs_sm == 0 || st.needs_sm == 80 || st.needs_sm == 90));
    CHECK(st.arch_specific == (st.needs_sm == 90));
    CHECK(kl::needs_text(st) == (st.needs_sm == 0 ? "any GPU" : st.needs_sm == 80 ? "sm_80+" : "sm_90a"));
  }
}

TEST_CASE(
    "the step table: step 1 is lesson 07's flash_mma (sm_80), the Hopper steps (sm_90a), the dispatcher, the library") {
  REQUIRE(kSteps.size() >= 2);
  CHECK(std::string(kSteps.front().name) == "flash_mma");
  CHECK((kSteps.front().launch == lesson07::launch_flash_mma));  // lesson 07's launcher, no copy
  CHECK(kSteps.front().needs_sm == 80);
  CHECK_FALSE(kSteps.front().library);
  const std::vector<lesson09::Step>& hopper = lesson09::hopper_steps();
  REQUIRE(kSteps.size() == hopper.size() + 3);
  for (std::size_t i = 0; i < hopper.size(); ++i) {
    CAPTURE(hopper[i].name);
    CHECK(std::string(kSteps[i + 1].name) == hopper[i].name);
    CHECK_FALSE(hopper[i].library);
    CHECK(hopper[i].needs_sm == 90);  // compiled for sm_90a alone (lesson09_hopper)
    CHECK(hopper[i].arch_specific);
  }
  const lesson09::Step& dispatch = kSteps[kSteps.size() - 2];
  CHECK(std::string(dispatch.name) == "dispatch");
  CHECK(dispatch.needs_sm == 80);  // step 1 where there is no sm_90a code
  CHECK_FALSE(dispatch.arch_specific);
  CHECK_FALSE(dispatch.library);
  CHECK(kSteps.back().library);
  CHECK(std::string(kSteps.back().name) == "cublas_materialised_S");
  CHECK(kSteps.back().needs_sm == 0);
}

TEST_CASE(
    "the dispatcher: step 8 at D = 128 from S = 512 (causal: from S = 4096), step 7 below; "
    "at D = 64 step 8 from S = 2048 (causal 4096), step 3 below; step 1 without sm_90a") {
  using lesson09::choose_step;
  for (int s : {512, 4096, 16384}) CHECK(choose_step(128, false, s, true) == 8);
  for (int s : {1, 128, 511}) CHECK(choose_step(128, false, s, true) == 7);
  for (int s : {4096, 8192, 16384}) CHECK(choose_step(128, true, s, true) == 8);
  for (int s : {1, 512, 2048, 4095}) CHECK(choose_step(128, true, s, true) == 7);
  for (int s : {2048, 4096, 16384}) CHECK(choose_step(64, false, s, true) == 8);
  for (int s : {1, 1024, 2047}) CHECK(choose_step(64, false, s, true) == 3);
  for (int s : {4096, 8192, 16384}) CHECK(choose_step(64, true, s, true) == 8);
  for (int s : {1, 2048, 4095}) CHECK(choose_step(64, true, s, true) == 3);
  for (int d : {64, 128})
    for (bool causal : {false, true}) CHECK(choose_step(d, causal, 4096, false) == 1);
  // the steps it names are the table's steps 1, 3, 7 and 8
  CHECK(std::string(kSteps[2].name) == "tma");
  CHECK(std::string(kSteps[6].name) == "persistent");
  CHECK(std::string(kSteps[7].name) == "next_s");
}

TEST_CASE("the step labels are 1 ... n, then lib (the CSV, the figure and the README tables read them)") {
  for (int i = 0; i < static_cast<int>(kSteps.size()); ++i) {
    CAPTURE(kSteps[i].name);
    CHECK(kl::step_label(kSteps, i) == (kSteps[i].library ? "lib" : std::to_string(i + 1)));
  }
  CHECK(kl::find_steps(kSteps, "1") == std::vector<int>{0});
  CHECK(kl::find_steps(kSteps, "lib").size() == 1);
}

TEST_CASE("validate: D = 64 or 128 only, any S >= 1, a positive finite scale") {
  for (int d : {64, 128}) {
    CHECK_NOTHROW(lesson09::validate(flash(1, 1, 1, d, false)));
    CHECK_NOTHROW(lesson09::validate(flash(2, 3, 4097, d, true)));
  }
  for (int d : {0, 16, 32, 96, 256}) {
    CAPTURE(d);
    CHECK_THROWS_AS(lesson09::validate(flash(1, 1, 128, d, false)), kl::UsageError);
  }
  CHECK_THROWS_WITH_AS(lesson09::validate(flash(1, 1, 128, 96, false)), doctest::Contains("D = 96"), kl::UsageError);
  Problem bad = flash(1, 1, 128, 64, false);
  bad.scale = 0;
  CHECK_THROWS_AS(lesson09::validate(bad), kl::UsageError);
  bad.scale = INFINITY;
  CHECK_THROWS_AS(lesson09::validate(bad), kl::UsageError);
  CHECK_THROWS_AS(lesson09::validate(flash(1, 1, 0, 64, false)), kl::UsageError);
  CHECK_THROWS_AS(lesson09::validate(flash(0, 1, 64, 64, false)), kl::UsageError);
}

TEST_CASE("shapes: the default is 16 x 16 x 4096 x 64; the options set B, H, S, D, causal and the scale") {
  const auto def = lesson09::shapes(args({}));
  REQUIRE(def.size() == 1);
  CHECK(lesson09::shape_text(def[0]) == "BxHxSxD=16x16x4096x64");
  CHECK(def[0].scale == doctest::Approx(0.125));
  const auto one =
      lesson09::shapes(args({{"batch", 2}, {"heads", 3}, {"seq", 100}, {"dim", 128}}, {{"scale", "0.5"}}, true));
  REQUIRE(one.size() == 1);
  CHECK(lesson09::shape_text(one[0]) == "BxHxSxD=2x3x100x128;causal");
  CHECK(one[0].causal);
  CHECK(one[0].scale == 0.5f);
}

TEST_CASE("shapes: bad options are refused, never clamped or wrapped") {
  CHECK_THROWS_WITH_AS(lesson09::shapes(args({{"dim", 96}})), doctest::Contains("D = 96"), kl::UsageError);
  CHECK_THROWS_AS(lesson09::shapes(args({{"seq", 0}})), kl::UsageError);
  for (const char* bad : {"-1", "0", "abc", "1e99", "nan", "0.5x"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(lesson09::shapes(args({}, {{"scale", bad}})), kl::UsageError);
  }
  // B * H = 67280421310721 * 274177 wraps to 1 in 64 bits; H and S above 2^30 do not fit the kernels' ints
  CHECK_THROWS_AS(lesson09::shapes(args({{"batch", 67280421310721}, {"heads", 274177}, {"seq", 4096}})),
                  kl::UsageError);
  const std::int64_t over = (std::int64_t{1} << 30) + 1;
  CHECK_THROWS_WITH_AS(lesson09::shapes(args({{"heads", over}})), doctest::Contains("--heads"), kl::UsageError);
  CHECK_THROWS_WITH_AS(lesson09::shapes(args({{"seq", over}})), doctest::Contains("--seq"), kl::UsageError);
}

TEST_CASE("the sweep: S = 128 ... 16384 with B S = 65536, H = 16, D = 64 and 128, causal and not; --scale applies") {
  kl::Args sweep = args({});
  sweep.sweep = true;
  const auto shapes = lesson09::shapes(sweep);
  CHECK(shapes.size() == 2 * 2 * 8);
  std::set<std::string> seen;
  for (const auto& p : shapes) {
    CAPTURE(lesson09::shape_text(p));
    CHECK(seen.insert(lesson09::shape_text(p)).second);
    CHECK(p.batch * p.seq == 65536);
    CHECK(p.heads == 16);
    CHECK(p.seq >= 128);
    CHECK(p.seq <= 16384);
    CHECK(p.scale == doctest::Approx(1.0 / std::sqrt(p.dim)));
  }
  for (const char* s : {"BxHxSxD=512x16x128x64", "BxHxSxD=4x16x16384x128;causal", "BxHxSxD=16x16x4096x64"})
    CHECK(seen.count(s) == 1);
  sweep.texts["scale"] = "0.5";
  for (const auto& p : lesson09::shapes(sweep)) CHECK(p.scale == 0.5f);
}

TEST_CASE("FLOPs: 4 B H S^2 D, half when causal; bytes: Q, K, V, O once (lesson 07's counts)") {
  CHECK(lesson09::flops(flash(16, 16, 4096, 64, false)) == 4.0 * 16 * 16 * 4096.0 * 4096 * 64);
  CHECK(lesson09::flops(flash(16, 16, 4096, 64, true)) == 2.0 * 16 * 16 * 4096.0 * 4096 * 64);
  CHECK(lesson09::bytes(flash(16, 16, 4096, 64, false)) == 4.0 * 16 * 16 * 4096.0 * 64 * 2);
}

TEST_SUITE("gpu") {
  TEST_CASE("hopper_missing: empty exactly on an sm_90 GPU, whose sm_90a code this build always holds") {
    const kl::DeviceInfo dev = kl::device_info();
    const std::string why = lesson09::hopper_missing();
    CAPTURE(why);
    CHECK(lesson09::hopper_available() == why.empty());
    if (dev.cc_major * 10 + dev.cc_minor == 90) CHECK(why.empty());
    else CHECK(why.rfind("needs sm_90a (this GPU is sm_" + std::to_string(dev.cc_major * 10 + dev.cc_minor), 0) == 0);
    CHECK(cudaGetLastError() == cudaSuccess);  // the failed look-up leaves no error behind
  }

  TEST_CASE("every step: S = 1 ... 1000, tails no multiple of a tile, D = 64 and 128, causal and not") {
    const std::vector<int> seqs =
        sanitizing() ? std::vector<int>{1, 17, 129} : std::vector<int>{1, 17, 64, 100, 128, 129, 1000};
    for (bool causal : {false, true}) {
      for (int d : {64, 128}) {
        for (int s : seqs) {
          const Problem p = s >= 1000 ? flash(1, 2, s, d, causal) : flash(2, 3, s, d, causal);
          check_steps(p, kl::seed_for(800 + s + d + causal));
        }
      }
    }
  }

  TEST_CASE("steps 7 and 8, persistent: more query tiles than SMs, so each block walks several (its stages run on)") {
    const int heads = kl::sm_count() + 1;  // S = 200: two query tiles a head at D = 64 and 128
    for (const char* step : {"persistent", "next_s"}) {
      CAPTURE(step);
      REQUIRE(kl::find_steps(kSteps, step).size() == 1);
      for (bool causal : {false, true})
        for (int d : {64, 128})
          check_steps(flash(1, heads, 200, d, causal), kl::seed_for(870 + d + causal), false, step);
    }
  }

  TEST_CASE("every step: scores scaled by 1e3, causal and not (the row max must be subtracted)") {
    for (bool causal : {false, true}) {
      for (int d : {64, 128}) {
        Problem p = flash(1, 2, sanitizing() ? 70 : 333, d, causal);
        p.scale *= 1000.f;
        check_steps(p, kl::seed_for(830 + d + causal), false);  // the library's f16 S would overflow
      }
    }
  }

  TEST_CASE("after its first run every step replays from a CUDA graph (the executable times short steps so)") {
    for (const Problem& shape : {flash(1, 2, 100, 64, true), flash(2, 1, 70, 128, false)}) {
      Problem p = shape;
      const Inputs in = test_inputs(p, kl::seed_for(850));
      const std::vector<double> ref = lesson09::reference(in.q, in.k, in.v, p);
      DeviceQkvo d(in);
      p = d.on(p);
      cudaStream_t stream;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      for (const auto& st : kSteps) {
        const std::string step = st.name;
        CAPTURE(step);
        lesson09::Workspace ws;
        try {
          lesson09::run_step(st, p, ws, stream);  // the first run may allocate and set kernel attributes
        } catch (const kl::NotSupported& e) {
          refused(st, e);
          continue;
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        d.o.poison();
        kl::replay_once(stream, [&](cudaStream_t s) { lesson09::run_step(st, p, ws, s); });
        CHECK(lesson09::max_error(d.o.download(), ref, all_rows(p), p.dim) <= lesson09::kRel);
      }
      CUDA_CHECK(cudaStreamDestroy(stream));
    }
  }
}
