// Lesson 07 checks. CPU cases: the step table, shape validation, the command-line shapes, the float64
// reference on cases with a known answer, the sampled rows, the error metric, the library's memory
// budget, the sweep. The
// "gpu" suite runs every step of each part on fresh f16 inputs, output poisoned, against the float64
// reference: tile counts 1 ... 4097; flash shapes with S = 1, S not a multiple of the 64-row tiles
// (masked tails), causal and not, D = 64 and 128; scores scaled by 1e3 (the max subtraction must
// hold); replay from a CUDA graph; and the f32 GPU reference main.cu uses for large shapes. A step
// that needs sm_80 (4, 6) is n/a on an older GPU or where this build compiled it out: reported, not run.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/07_wmma_attention/attention.cuh"

using lesson07::kSteps;
using lesson07::Part;
using lesson07::Problem;

namespace {

using kl::sanitizing;

using Inputs = lesson07::HostQkv;  // Q, K, V rounded to f16 (lessons/07_wmma_attention/host.cuh)
using lesson07::all_rows;
using lesson07::DeviceQkvo;
using lesson07::test_inputs;

// Runs one step with the output poisoned (NaN); throws NotSupported as the step does.
std::vector<__half> run(const lesson07::Step& st, Problem p, const Inputs& in) {
  DeviceQkvo d(in);
  d.o.poison();
  p = d.on(p);
  lesson07::Workspace ws;
  lesson07::run_step(st, p, ws, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return d.o.download();
}

// A launcher refused its step (kl::NotSupported). Only the library may turn a shape down; a step of the
// lesson only for its architecture (kl::arch_missing: "needs sm_80 ..."), and then it is reported n/a,
// neither failed nor passed.
void refused(const lesson07::Step& st, const kl::NotSupported& e) {
  if (st.library) return;
  const std::string why = e.what();
  CHECK(st.needs_sm > 0);
  CHECK(why.rfind("needs sm_" + std::to_string(st.needs_sm), 0) == 0);
  MESSAGE("step " << st.name << " n/a: " << why);
}

// Every step of `part` on one problem against the float64 reference of every row.
void check_part(Part part, const Problem& p, std::uint64_t seed, bool with_library = true) {
  const Inputs in = test_inputs(p, seed);
  const std::vector<double> ref = lesson07::reference(in.q, in.k, in.v, p);
  for (const auto& st : kSteps) {
    if (lesson07::part_of(st) != part || (st.library && !with_library)) continue;
    const std::string step = st.name;
    CAPTURE(step);
    CAPTURE(p.batch);
    CAPTURE(p.heads);
    CAPTURE(p.seq);
    CAPTURE(p.dim);
    CAPTURE(p.causal);
    CAPTURE(p.scale);
    std::vector<__half> got;
    try {
      got = run(st, p, in);
    } catch (const kl::NotSupported& e) {
      refused(st, e);
      continue;
    }
    CHECK(lesson07::max_error(got, ref, all_rows(p), p.dim) <= lesson07::kRel);
  }
}

Problem flash(std::int64_t b, int h, int s, int d, bool causal) { return lesson07::flash_problem(b, h, s, d, causal); }

}  // namespace

TEST_CASE("the step table: unique names, tile steps then flash steps, one library row per part") {
  std::set<std::string> names;
  int libs[2] = {0, 0};
  bool flash_seen = false;
  for (const auto& st : kSteps) {
    CAPTURE(st.name);
    CHECK(names.insert(st.name).second);
    CHECK((st.launch != nullptr));
    REQUIRE(st.part != nullptr);
    CHECK((std::string(st.part) == "tile" || std::string(st.part) == "flash"));
    if (lesson07::part_of(st) == Part::flash) flash_seen = true;
    else CHECK_FALSE(flash_seen);
    if (st.library) ++libs[lesson07::part_of(st) == Part::tile ? 0 : 1];
  }
  CHECK(libs[0] == 1);
  CHECK(libs[1] == 1);
}

TEST_CASE("the step labels are 1-4, lib, 5-6, lib (the CSV and the README tables read them)") {
  const std::vector<std::string> want = {"1", "2", "3", "4", "lib", "5", "6", "lib"};
  REQUIRE(kSteps.size() == want.size());
  for (int i = 0; i < static_cast<int>(kSteps.size()); ++i) {
    CAPTURE(kSteps[i].name);
    CHECK(kl::step_label(kSteps, i) == want[i]);
  }
}

TEST_CASE("needs_sm: 80 for the mma.sync / ldmatrix / cp.async steps (4 and 6), 0 for WMMA and the library") {
  for (const auto& st : kSteps) {
    CAPTURE(st.name);
    const std::string name = st.name;
    CHECK(st.needs_sm == (name == "tile_registers" || name == "flash_mma" ? 80 : 0));
  }
}

TEST_CASE("validate: the tile is 16x16x16; flash takes D = 64 or 128 only, any S >= 1") {
  CHECK_NOTHROW(lesson07::validate(lesson07::tile_problem(1), Part::tile));
  Problem t = lesson07::tile_problem(4);
  t.seq = 32;
  CHECK_THROWS_AS(lesson07::validate(t, Part::tile), kl::UsageError);
  for (int d : {64, 128}) {
    CHECK_NOTHROW(lesson07::validate(flash(1, 1, 1, d, false), Part::flash));
    CHECK_NOTHROW(lesson07::validate(flash(2, 3, 4097, d, true), Part::flash));
  }
  for (int d : {16, 32, 96, 256}) {
    CAPTURE(d);
    CHECK_THROWS_AS(lesson07::validate(flash(1, 1, 128, d, false), Part::flash), kl::UsageError);
  }
  try {
    lesson07::validate(flash(1, 1, 128, 96, false), Part::flash);
  } catch (const kl::UsageError& e) {
    CHECK(std::string(e.what()).find("D = 96") != std::string::npos);
  }
  Problem bad = flash(1, 1, 128, 64, false);
  bad.scale = 0;
  CHECK_THROWS_AS(lesson07::validate(bad, Part::flash), kl::UsageError);
  bad.scale = -1;
  CHECK_THROWS_AS(lesson07::validate(bad, Part::flash), kl::UsageError);
  CHECK_THROWS_AS(lesson07::validate(flash(1, 1, 0, 64, false), Part::flash), kl::UsageError);
}

TEST_CASE("validate: B * H * S * D and B * H are checked for overflow, never wrapped") {
  Problem p = flash(1, 1, 1, 64, false);
  p.batch = 67280421310721;  // B * H = 2^64 + 1 with H = 274177: wraps to 1
  p.heads = 274177;
  p.seq = 4096;
  CHECK_THROWS_WITH_AS(lesson07::validate(p, Part::flash), doctest::Contains("B * H * S * D"), kl::UsageError);
  p = flash(std::int64_t{1} << 31, 1, 1, 64, false);  // 2^37 elements, but B * H does not fit an int
  CHECK_THROWS_WITH_AS(lesson07::validate(p, Part::flash), doctest::Contains("B * H"), kl::UsageError);
  CHECK_NOTHROW(lesson07::validate(flash((std::int64_t{1} << 31) - 1, 1, 1, 64, false), Part::flash));
  CHECK_THROWS_AS(lesson07::validate(lesson07::tile_problem(std::int64_t{1} << 33), Part::tile), kl::UsageError);
}

namespace {

// The options as the driver hands them to lesson07::shapes.
kl::Args args(const std::map<std::string, std::int64_t>& sizes, const std::map<std::string, std::string>& texts = {},
              bool causal = false) {
  kl::Args a;
  a.sizes = sizes;
  a.texts = texts;
  if (causal) a.flags["causal"] = true;
  return a;
}

const std::map<std::string, std::string> kFlash = {{"part", "flash"}}, kTile = {{"part", "tile"}};

}  // namespace

TEST_CASE("shapes: the defaults are both parts, 65536 tiles and 16 x 16 x 4096 x 64") {
  const auto shapes = lesson07::shapes(args({}));
  REQUIRE(shapes.size() == 2);
  CHECK(lesson07::shape_text(shapes[0]) == "B=65536");
  CHECK(lesson07::shape_text(shapes[1]) == "BxHxSxD=16x16x4096x64");
  const auto causal = lesson07::shapes(args({{"seq", 100}}, kFlash, true));
  REQUIRE(causal.size() == 1);
  CHECK(lesson07::shape_text(causal[0]) == "BxHxSxD=16x16x100x64;causal");
  CHECK(lesson07::shape_text(lesson07::shapes(args({{"batch", 7}}, kTile))[0]) == "B=7");
}

TEST_CASE("shapes: sizes that wrap or do not fit an int are refused, not clamped") {
  CHECK_THROWS_AS(lesson07::shapes(args({{"batch", 67280421310721}, {"heads", 274177}, {"seq", 4096}}, kFlash)),
                  kl::UsageError);
  const std::int64_t over = (std::int64_t{1} << 30) + 1;
  CHECK_THROWS_WITH_AS(lesson07::shapes(args({{"heads", over}}, kFlash)), doctest::Contains("--heads"), kl::UsageError);
  CHECK_THROWS_WITH_AS(lesson07::shapes(args({{"seq", over}}, kFlash)), doctest::Contains("--seq"), kl::UsageError);
  CHECK_THROWS_WITH_AS(lesson07::shapes(args({{"dim", over}}, kFlash)), doctest::Contains("--dim"), kl::UsageError);
  // 2^30 heads is taken as it is (B = S = 1, D = 64: 2^36 elements)
  const auto shapes = lesson07::shapes(args({{"batch", 1}, {"heads", std::int64_t{1} << 30}, {"seq", 1}}, kFlash));
  CHECK(shapes[0].second.heads == (1 << 30));
}

TEST_CASE("shapes: shape options belong to a part; --scale is a positive number and applies to the sweep") {
  CHECK_THROWS_AS(lesson07::shapes(args({{"seq", 64}}, kTile)), kl::UsageError);
  CHECK_THROWS_AS(lesson07::shapes(args({{"seq", 64}})), kl::UsageError);
  CHECK_THROWS_AS(lesson07::shapes(args({{"batch", 4}})), kl::UsageError);
  CHECK_THROWS_AS(lesson07::shapes(args({}, {{"part", "gemm"}})), kl::UsageError);
  CHECK_THROWS_AS(lesson07::shapes(args({{"dim", 96}}, kFlash)), kl::UsageError);
  for (const char* bad : {"-1", "0", "abc", "1e99", "nan", "0.5x"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(lesson07::shapes(args({}, {{"scale", bad}})), kl::UsageError);
  }
  kl::Args sweep = args({}, {{"scale", "0.5"}});
  sweep.sweep = true;
  const auto shapes = lesson07::shapes(sweep);
  CHECK(shapes.size() == lesson07::sweep_shapes().size());
  for (const auto& sh : shapes) CHECK(sh.second.scale == 0.5f);
  sweep.texts["part"] = "flash";
  CHECK_THROWS_AS(lesson07::shapes(sweep), kl::UsageError);
}

TEST_CASE("--step: a step of the other part is refused; \"lib\" matches the library row of each part") {
  using lesson07::check_step_part;
  CHECK_THROWS_WITH_AS(check_step_part(std::string("5"), args({}, kTile)), doctest::Contains("--part flash"),
                       kl::UsageError);
  CHECK_THROWS_AS(check_step_part(std::string("tile_reference"), args({}, kFlash)), kl::UsageError);
  CHECK_NOTHROW(check_step_part(std::string("5"), args({}, kFlash)));
  CHECK_NOTHROW(check_step_part(std::string("5"), args({})));
  CHECK_NOTHROW(check_step_part(std::string("lib"), args({}, kTile)));
  CHECK_NOTHROW(check_step_part(std::string("lib"), args({}, kFlash)));
  CHECK_NOTHROW(check_step_part(std::nullopt, args({}, kTile)));
  CHECK(kl::find_steps(kSteps, "lib").size() == 2);
}

TEST_CASE("reference: equal scores average V; causal row 0 is V's row 0; a huge scale picks the best key") {
  Problem p = flash(1, 1, 3, 64, false);
  std::vector<float> q(3 * 64, 0.f), k(3 * 64), v(3 * 64);
  for (int i = 0; i < 3 * 64; ++i) {
    k[i] = static_cast<float>(i % 7);
    v[i] = static_cast<float>(i / 64 + 1);  // V's rows are 1, 2, 3
  }
  auto o = lesson07::reference(q, k, v, p);  // q = 0: every score equal
  for (int c = 0; c < 64; ++c) CHECK(o[c] == doctest::Approx(2.0).epsilon(1e-14));
  p.causal = true;
  o = lesson07::reference(q, k, v, p);
  CHECK(o[0] == 1.0);
  CHECK(o[64] == doctest::Approx(1.5).epsilon(1e-14));
  // q = e_0, k rows 0, 1, 2 with k[., 0] = 0, 1, 2 (scaled by 1e3): row 2 sees key 2 alone
  p = flash(1, 1, 3, 64, false);
  p.scale = 1000.f;
  std::fill(q.begin(), q.end(), 0.f);
  std::fill(k.begin(), k.end(), 0.f);
  for (int r = 0; r < 3; ++r) {
    q[r * 64] = 1.f;
    k[r * 64] = static_cast<float>(r);
  }
  o = lesson07::reference(q, k, v, p);
  for (int r = 0; r < 3; ++r) CHECK(o[r * 64 + 5] == doctest::Approx(3.0).epsilon(1e-12));
}

TEST_CASE("sample_rows: first and last row, sorted, every position of a head comes up") {
  const Problem p = flash(16, 16, 4096, 64, false);
  const auto rows = lesson07::sample_rows(p);
  CHECK(rows.front() == 0);
  CHECK(rows.back() == p.rows() - 1);
  CHECK(rows.size() >= 4000);
  CHECK(rows.size() <= 4100);
  std::set<std::int64_t> positions;
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i] > rows[i - 1]);
  for (auto r : rows) positions.insert(r % p.seq);
  CHECK(positions.size() > 1000);
  CHECK(lesson07::sample_rows(flash(1, 2, 100, 64, false)).size() == 200);
}

TEST_CASE("max_error: the reference passes, a 2% error or a NaN fails") {
  const std::vector<std::int64_t> rows = {0, 1};
  const std::vector<double> ref = {0.5, -0.25, 1.0, 0.0};
  std::vector<__half> o = {__float2half(0.5f), __float2half(-0.25f), __float2half(1.f), __float2half(0.f)};
  CHECK(lesson07::max_error(o, ref, rows, 2) == 0);
  o[2] = __float2half(1.03f);
  CHECK(lesson07::max_error(o, ref, rows, 2) > lesson07::kRel);
  o[2] = __float2half(NAN);
  CHECK(std::isinf(lesson07::max_error(o, ref, rows, 2)));
}

TEST_CASE("FLOPs: 4 B H S^2 D, half when causal; bytes: Q, K, V, O once") {
  CHECK(lesson07::flops(flash(16, 16, 4096, 64, false)) == 4.0 * 16 * 16 * 4096.0 * 4096 * 64);
  CHECK(lesson07::flops(flash(16, 16, 4096, 64, true)) == 2.0 * 16 * 16 * 4096.0 * 4096 * 64);
  CHECK(lesson07::bytes(lesson07::tile_problem(4096)) == 4096.0 * 4 * 512);
}

TEST_CASE("the library baseline says n/a, before allocating, where S and P exceed 16 GiB") {
  lesson07::Workspace ws;
  CHECK_THROWS_AS(lesson07::launch_library(flash(4, 16, 16384, 64, false), ws, nullptr), kl::NotSupported);
  CHECK(lesson07::library_bytes(flash(16, 16, 4096, 64, false)) <= lesson07::kLibraryBudgetBytes);
}

TEST_CASE("the sweep: B = 4096 and 65536 tiles, then S = 128 ... 16384 with B S = 65536, D = 64, 128, causal or not") {
  const auto shapes = lesson07::sweep_shapes();
  CHECK(shapes.size() == 2 + 2 * 2 * 8);
  CHECK(shapes[0].second.batch == 4096);
  CHECK(shapes[1].second.batch == 65536);
  for (std::size_t i = 2; i < shapes.size(); ++i) {
    const Problem& p = shapes[i].second;
    CHECK(shapes[i].first == Part::flash);
    CHECK(p.batch * p.seq == 65536);
    CHECK(p.scale == doctest::Approx(1.0 / std::sqrt(p.dim)));
    CHECK_NOTHROW(lesson07::validate(p, Part::flash));
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("tile steps: B = 1 ... 4097 tiles against float64") {
    const std::vector<std::int64_t> counts =
        sanitizing() ? std::vector<std::int64_t>{1, 3, 17} : std::vector<std::int64_t>{1, 3, 8, 100, 4097};
    for (auto b : counts) check_part(Part::tile, lesson07::tile_problem(b), kl::seed_for(700 + b));
  }

  TEST_CASE("tile steps: scores scaled by 1e3 (the row max must be subtracted)") {
    Problem p = lesson07::tile_problem(sanitizing() ? 9 : 300);
    p.scale *= 1000.f;
    check_part(Part::tile, p, kl::seed_for(711), false);  // the library's f16 S would overflow
  }

  TEST_CASE("flash steps: S = 1, tails that are not a multiple of 64, D = 64 and 128, causal and not") {
    std::vector<Problem> shapes;
    for (bool causal : {false, true}) {
      for (int d : {64, 128}) {
        shapes.push_back(flash(1, 1, 1, d, causal));
        shapes.push_back(flash(1, 2, 17, d, causal));
        shapes.push_back(flash(2, 1, 64, d, causal));
        shapes.push_back(flash(1, 3, 129, d, causal));
        if (!sanitizing()) {
          shapes.push_back(flash(2, 2, 100, d, causal));
          shapes.push_back(flash(1, 2, 1000, d, causal));
          shapes.push_back(flash(1, 1, 4097, d, causal));
        }
      }
    }
    for (const auto& p : shapes) check_part(Part::flash, p, kl::seed_for(720 + p.seq + p.dim + p.causal));
  }

  TEST_CASE("flash steps: scores scaled by 1e3, causal and not") {
    for (bool causal : {false, true}) {
      for (int d : {64, 128}) {
        Problem p = flash(1, 2, sanitizing() ? 70 : 333, d, causal);
        p.scale *= 1000.f;
        check_part(Part::flash, p, kl::seed_for(730 + d + causal), false);
      }
    }
  }

  TEST_CASE("after its first run every step replays from a CUDA graph (main.cu times short steps so)") {
    for (const auto& [part, shape] : {std::pair<Part, Problem>{Part::tile, lesson07::tile_problem(100)},
                                      {Part::flash, flash(1, 2, 100, 64, true)},
                                      {Part::flash, flash(2, 1, 70, 128, false)}}) {
      Problem p = shape;
      const Inputs in = test_inputs(p, kl::seed_for(750));
      const std::vector<double> ref = lesson07::reference(in.q, in.k, in.v, p);
      DeviceQkvo d(in);
      p = d.on(p);
      cudaStream_t stream;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      for (const auto& st : kSteps) {
        if (lesson07::part_of(st) != part) continue;
        const std::string step = st.name;
        CAPTURE(step);
        lesson07::Workspace ws;
        try {
          lesson07::run_step(st, p, ws, stream);  // the first run may allocate and set kernel attributes
        } catch (const kl::NotSupported& e) {
          refused(st, e);
          continue;
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        d.o.poison();
        kl::replay_once(stream, [&](cudaStream_t s) { lesson07::run_step(st, p, ws, s); });
        CHECK(lesson07::max_error(d.o.download(), ref, all_rows(p), p.dim) <= lesson07::kRel);
      }
      CUDA_CHECK(cudaStreamDestroy(stream));
    }
  }

  TEST_CASE("the f32 GPU reference (large shapes in main.cu) agrees with float64 on its sampled rows") {
    for (bool causal : {false, true}) {
      const Problem shape = flash(2, 2, sanitizing() ? 130 : 777, 128, causal);
      const Inputs in = test_inputs(shape, kl::seed_for(740));
      DeviceQkvo d(in);
      const Problem p = d.on(shape);
      const auto rows = lesson07::sample_rows(p, 100);
      const auto want = lesson07::reference(in.q, in.k, in.v, p, rows);
      const auto got = lesson07::reference_gpu(p, rows);
      double worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      CHECK(worst < 1e-4);
    }
  }
}
