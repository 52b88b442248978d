// CPU checks of common/: statistics, the command-line parser, the CSV writer and table, references
// and random inputs. The GPU suite checks the pieces that need a device: buffers and the timer.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "common/block.cuh"
#include "common/cli.hpp"
#include "common/grade_channel.hpp"
#include "common/ladder.hpp"
#include "common/pack.cuh"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/report.hpp"
#include "common/softmax_math.cuh"
#include "common/timing.cuh"

namespace {
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
}

// One block of 256 threads: each thread writes its warp's and its block's sum and max.
__global__ void reduce_probe(const float* x, float* warp_sum, float* warp_max, float* block_sum, float* block_max) {
  const float v = x[threadIdx.x];
  warp_sum[threadIdx.x] = kl::warp_allreduce(v);
  warp_max[threadIdx.x] = kl::warp_allreduce<kl::MaxOp>(v);
  block_sum[threadIdx.x] = kl::block_allreduce<256>(v);
  block_max[threadIdx.x] = kl::block_allreduce<256, kl::MaxOp>(v);
}

// Both NaN-keeping maxima and the online combine, for every pair of special values: one thread.
__global__ void max_probe(const float* a, const float* b, int n, float* cmp_select, float* one_op, float* comb) {
  for (int i = 0; i < n; ++i) {
    cmp_select[i] = kl::max_nan(a[i], b[i]);
    one_op[i] = kl::max_nan_1op(a[i], b[i]);
    comb[i] = kl::combine({a[i], 1.f}, {b[i], 2.f}).s;
  }
}

kl::Cli parse(std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return kl::Cli(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("summarize: median of odd and even counts, min, max") {
  auto s = kl::summarize({5, 1, 3});
  CHECK(s.median == 3);
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(kl::summarize({4, 1, 3, 2}).median == 2.5);
  CHECK(kl::summarize({7}).median == 7);
  CHECK_THROWS(kl::summarize({}));
}

TEST_CASE("cli: sizes as digits or powers of two; flags; choices; defaults") {
  auto cli = parse({"--n", "2^26", "--reps=7", "--sweep", "--dtype", "f16"});
  CHECK(cli.size("n", 1) == (std::int64_t{1} << 26));
  CHECK(cli.size("reps", 1) == 7);
  CHECK(cli.size("rows", 42) == 42);
  CHECK(cli.flag("sweep"));
  CHECK_FALSE(cli.flag("list"));
  CHECK(cli.choice("dtype", "f32", {"f32", "f16"}) == "f16");
  CHECK_NOTHROW(cli.finish());
}

TEST_CASE("cli: every bad input is a UsageError") {
  for (const char* bad : {"abc", "-5", "0", "", "1.5", "2^99", "3^4", "99999999999999999999", "12abc"}) {
    CAPTURE(bad);
    auto cli = parse({"--n", bad});
    CHECK_THROWS_AS(cli.size("n", 1), kl::UsageError);
  }
  CHECK_THROWS_AS(parse({"--n", "1", "--n", "2"}), kl::UsageError);        // given twice
  CHECK_THROWS_AS(parse({"stray"}), kl::UsageError);                       // not an option
  CHECK_THROWS_AS(parse({"--n"}).size("n", 1), kl::UsageError);            // missing value
  CHECK_THROWS_AS(parse({"--sweep", "3"}).flag("sweep"), kl::UsageError);  // flag with a value
  CHECK_THROWS_AS(parse({"--dtype", "f64"}).choice("dtype", "f32", {"f32"}), kl::UsageError);
  CHECK_THROWS_AS(parse({"--bogus"}).finish(), kl::UsageError);
}

TEST_CASE("cli: 2^0 is 1; sizes above a limit are refused, never clamped; products are overflow-checked") {
  CHECK(parse({"--n", "2^0"}).size("n", 5) == 1);
  CHECK(parse({"--n", "2^30"}).size("n", 5, std::int64_t{1} << 30) == (std::int64_t{1} << 30));
  CHECK_THROWS_AS(parse({"--n", "1073741825"}).size("n", 5, std::int64_t{1} << 30), kl::UsageError);
  CHECK(kl::checked_product({1024, 16, 4096}, std::int64_t{1} << 40, "B*H*S") == (std::int64_t{1} << 26));
  CHECK_THROWS_AS(kl::checked_product({67280421310721, 274177}, std::int64_t{1} << 40, "B*H"), kl::UsageError);
}

TEST_CASE("cli: echoed values keep the message on one line") {
  CHECK(kl::escaped("a\nb\tc\x01") == "a\\nb\\tc\\x01");
  try {
    parse({"--n", "1\n2"}).size("n", 1);
    FAIL("accepted a newline");
  } catch (const kl::UsageError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("softmax arithmetic on the host: NaN-keeping max, and a part with m = -inf adds nothing") {
  CHECK(kl::max_nan(1.f, 2.f) == 2.f);
  CHECK(std::isnan(kl::max_nan(NAN, 2.f)));
  CHECK(std::isnan(kl::max_nan(2.f, NAN)));
  CHECK(kl::max_nan(-INFINITY, -3.f) == -3.f);
  const kl::MaxSum empty{-INFINITY, 0.f}, part{2.f, 3.f};
  CHECK(kl::combine(empty, part).m == 2.f);
  CHECK(kl::combine(empty, part).s == 3.f);
  CHECK(kl::combine(empty, empty).s == 0.f);  // not NaN: (-inf) - (-inf) is never exponentiated
  const kl::MaxSum both = kl::combine({0.f, 1.f}, {1.f, 1.f});
  CHECK(both.s == doctest::Approx(1.f + std::exp(-1.f)));
  CHECK(std::isnan(kl::combine({NAN, 1.f}, part).m));
}

TEST_CASE("pack split: head up to the 16-byte boundary, whole packs, tail; every element once") {
  alignas(16) float buf[64] = {};
  for (int offset = 0; offset < 4; ++offset) {
    for (std::size_t n : {0, 1, 2, 3, 4, 5, 7, 8, 33, 60}) {
      CAPTURE(offset);
      CAPTURE(n);
      const kl::PackSplit<4, float, std::size_t> sp(buf + offset, n);
      CHECK(sp.head < 4);
      CHECK(sp.tail < 4);
      CHECK(sp.head + 4 * sp.packs + sp.tail == n);
      if (sp.packs > 0) CHECK(reinterpret_cast<std::uintptr_t>(sp.body(buf + offset)) % 16 == 0);
      if (n >= 4) CHECK(sp.head == (4 - offset) % 4);
      std::set<std::size_t> seen;
      for (std::size_t i = 0; i < sp.head + sp.tail; ++i) seen.insert(sp.edge(i));
      for (std::size_t q = 0; q < sp.packs; ++q)
        for (std::size_t j = 0; j < 4; ++j) seen.insert(sp.head + 4 * q + j);
      CHECK(seen.size() == n);
      if (n > 0) CHECK(*seen.rbegin() == n - 1);
    }
  }
}

TEST_CASE("FP32 lanes per SM by architecture: 64 on sm_7x and sm_80, 128 on sm_86 and later") {
  CHECK(kl::DeviceInfo::fp32_lanes_per_sm(7, 5) == 64);
  CHECK(kl::DeviceInfo::fp32_lanes_per_sm(7, 0) == 64);
  CHECK(kl::DeviceInfo::fp32_lanes_per_sm(8, 0) == 64);
  for (auto [major, minor] : {std::pair{8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}})
    CHECK(kl::DeviceInfo::fp32_lanes_per_sm(major, minor) == 128);
  kl::DeviceInfo h100;
  h100.sms = 132;
  h100.cc_major = 9;
  h100.sm_clock_khz = 1980000;
  CHECK(h100.peak_fp32_tflops() == doctest::Approx(132 * 128 * 2 * 1.98e9 / 1e12));
}

TEST_CASE("guarded_main maps errors to exit codes 2, 77 and 1") {
  CHECK(kl::guarded_main("t", [] { return 0; }) == 0);
  CHECK(kl::guarded_main("t", []() -> int { throw kl::UsageError("bad"); }) == 2);
  CHECK(kl::guarded_main("t", []() -> int { throw kl::NoDevice("none"); }) == 77);
  CHECK(kl::guarded_main("t", []() -> int { throw std::runtime_error("cuda"); }) == 1);
}

TEST_CASE("step needs as --list shows them: any GPU, sm_80 or newer, sm_90a (that architecture alone)") {
  using Step = kl::Step<void (*)()>;
  CHECK(kl::needs_text(Step{"a", "idea", nullptr}) == "any GPU");
  CHECK(kl::needs_text(Step{"b", "idea", nullptr, false, 80}) == "sm_80+");
  CHECK(kl::needs_text(Step{"c", "idea", nullptr, false, 90, nullptr, true}) == "sm_90a");
}

TEST_CASE("csv: one schema, empty numbers for a FAILED row, commas kept out, header once") {
  kl::Limits lim{1000.0, 0};
  kl::Row ok{"1", "one_thread", "f32", "n=1024"};
  ok.bytes = 1e9;
  ok.ms = {2.0, 1.0, 3.0, 3};
  ok.err = 1e-7;
  kl::Row bad{"2", "broken, kernel", "f32", "n=1024"};
  bad.ok = false;
  bad.bytes = 1e9;
  bad.err = 0.5;
  CHECK(kl::csv_line("01", ok, lim, "GPU X") == "01,1,one_thread,f32,n=1024,2,1,3,500,,50,1e-07,GPU X");
  CHECK(kl::csv_line("01", bad, lim, "GPU X") == "01,2,broken; kernel,f32,n=1024,,,,,,,0.5,GPU X");

  const std::string path = "test_common_out.csv";
  std::remove(path.c_str());
  kl::CsvFile(path).write("01", {ok}, lim, "GPU X");
  kl::CsvFile(path).write("01", {bad}, lim, "GPU X");
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == kl::kCsvHeader);
  for (const auto& l : lines) CHECK(std::count(l.begin(), l.end(), ',') == 12);
  std::remove(path.c_str());
}

TEST_CASE("finish_run: exit 1 when a step failed; the CSV ends with the measured copy") {
  kl::Limits lim{2000.0, 0};
  kl::Row ok{"1", "fine", "f32", "n=8"}, bad{"2", "wrong", "f32", "n=8"};
  ok.bytes = bad.bytes = 32;
  ok.ms = {1, 1, 1, 1};
  bad.ok = false;
  CHECK(kl::finish_run(nullptr, "01", {ok}, lim, "GPU") == 0);
  const std::string path = "test_finish_run.csv";
  std::remove(path.c_str());
  {
    kl::CsvFile csv(path);
    CHECK(kl::finish_run(&csv, "01", {ok, bad}, lim, "GPU") == 1);
  }
  std::ifstream in(path);
  std::string line, last;
  int lines = 0;
  while (std::getline(in, line)) last = line, ++lines;
  CHECK(lines == 4);  // header, two steps, the copy
  CHECK(last.rfind("01,copy,device-to-device copy,", 0) == 0);
  std::remove(path.c_str());
}

TEST_CASE("record_check: the error and the verdict; --no-check computes nothing and fails nothing") {
  kl::Row row;
  int calls = 0;
  kl::record_check(
      row, false, [&] { return ++calls, 9.0; }, 1.0);
  CHECK(calls == 0);
  CHECK(std::isnan(row.err));
  CHECK(row.ok);
  kl::record_check(
      row, true, [&] { return ++calls, 0.5; }, 1.0);
  CHECK(row.err == 0.5);
  CHECK(row.ok);
  kl::record_check(
      row, true, [&] { return ++calls, 2.0; }, 1.0);
  CHECK_FALSE(row.ok);
  kl::record_check(
      row, true, [] { return double(NAN); }, 1.0);  // a NaN error is a failure
  CHECK_FALSE(row.ok);
  CHECK(calls == 2);
  CHECK_FALSE(row.inaccurate);
}

TEST_CASE("record_check: a library row over the limit is timed and marked inaccurate, never FAILED") {
  kl::Row lib{"lib", "cublas_materialised_S", "f16", "n", true};
  kl::record_check(
      lib, true, [] { return 0.5; }, 1e-2);
  CHECK(lib.ok);
  CHECK(lib.inaccurate);
  CHECK(lib.err == 0.5);
  kl::record_check(
      lib, true, [] { return 1e-3; }, 1e-2);
  CHECK(lib.ok);
  CHECK_FALSE(lib.inaccurate);
  kl::Row step{"3", "ours", "f16", "n"};
  kl::record_check(
      step, true, [] { return 0.5; }, 1e-2);  // a step of ours still fails
  CHECK_FALSE(step.ok);
  CHECK_FALSE(step.inaccurate);
  lib.inaccurate = true;
  lib.bytes = 1e6;
  lib.ms = {1, 1, 1, 1};
  std::ostringstream os;
  kl::print_table(os, {lib}, kl::Limits{1000.0, 0});
  CHECK(os.str().find("cublas_materialised_S [inaccurate]") != std::string::npos);
  CHECK(os.str().find("FAILED") == std::string::npos);
  CHECK(kl::finish_run(nullptr, "09", {lib}, kl::Limits{1000.0, 0}, "GPU") == 0);
}

TEST_CASE("table: ratios against step 1 and the library; FAILED rows carry no time") {
  kl::Limits lim{1000.0, 0};
  kl::Row s1{"1", "slow", "f32", "n"}, s2{"2", "wrong", "f32", "n"}, lib{"lib", "cub", "f32", "n", true};
  for (auto* r : {&s1, &s2, &lib}) r->bytes = 1e6;
  s1.ms = {10, 10, 10, 1};
  lib.ms = {0.002, 0.002, 0.002, 1};
  s2.ok = false;
  std::ostringstream os;
  kl::print_table(os, {s1, s2, lib}, lim);
  const std::string t = os.str();
  CHECK(t.find("FAILED") != std::string::npos);
  CHECK(t.find("5000.00") != std::string::npos);  // lib is 5000x step 1
  CHECK(t.find("50.0%") != std::string::npos);    // 500 GB/s of 1000
}

TEST_CASE("references: float64 sum, NaN-propagating max, mean, L2 norm") {
  const std::vector<float> v = {1.f, -2.f, 3.5f, 0.5f};
  CHECK(kl::ref_sum(v.data(), 4).sum == 3.0);
  CHECK(kl::ref_sum(v.data(), 4).abs_sum == 7.0);
  CHECK(kl::ref_max(v.data(), 4) == 3.5);
  CHECK(kl::ref_mean(v.data(), 4) == 0.75);
  CHECK(kl::ref_l2_norm(v.data(), 4) == doctest::Approx(std::sqrt(1 + 4 + 12.25 + 0.25)));
  const std::vector<float> w = {1.f, NAN, 5.f};
  CHECK(std::isnan(kl::ref_max(w.data(), 3)));
  CHECK(std::isnan(kl::ref_sum(w.data(), 3).sum));
  CHECK(kl::ref_max(v.data(), 0) == -INFINITY);
}

TEST_CASE("references: tolerance and error scale") {
  CHECK(kl::sum_tolerance(1, 5.0) < 1e-30);  // one term: exact
  CHECK(kl::sum_tolerance(100, 1.0) < kl::sum_tolerance(10000, 1.0));
  CHECK(kl::scaled_error(1.5, 1.0, 10.0) == doctest::Approx(0.05));
  CHECK(kl::scaled_error(NAN, NAN, 1.0) == 0);
  CHECK(std::isinf(kl::scaled_error(1.0, NAN, 1.0)));
  CHECK(std::isinf(kl::scaled_error(INFINITY, 1.0, 1.0)));
  CHECK(kl::scaled_error(INFINITY, INFINITY, 1.0) == 0);
  kl::SumRef r{10.0, 100.0};
  CHECK(kl::sum_close(10.0f, r, 1000));
  CHECK_FALSE(kl::sum_close(11.0f, r, 1000));
  CHECK_FALSE(kl::sum_close(NAN, r, 1000));
}

// The premises of common/sum_checks.hpp, which every reduction lesson relies on.
TEST_CASE("premise of the exact checks: float sums of small whole numbers are exact in any order") {
  auto v = kl::integer_floats(1 << 20, -4, 4, kl::seed_for(1));
  float forward = 0, backward = 0;
  for (float x : v) forward += x;
  for (auto it = v.rbegin(); it != v.rend(); ++it) backward += *it;
  const double exact = kl::ref_sum(v.data(), v.size()).sum;
  CHECK(forward == exact);
  CHECK(backward == exact);
}

TEST_CASE("premise of the tolerance: a sequential float sum of uniform[-1,1] data passes, a dropped element does not") {
  const std::size_t n = 4097;
  auto v = kl::uniform_floats(n, -1, 1, kl::seed_for(2));
  const kl::SumRef ref = kl::ref_sum(v.data(), n);
  float s = 0;
  for (float x : v) s += x;
  CHECK(kl::sum_close(s, ref, n));
  CHECK_FALSE(kl::sum_close(s - v[17], ref, n));
}

TEST_CASE("premise of the large-magnitude check: 2^28 x 1e30 fits a float; one accumulator stalls at 2^124") {
  const double total = std::ldexp(static_cast<double>(1e30f), 28);  // no partial sum exceeds it
  CHECK(total / FLT_MAX == doctest::Approx(0.789).epsilon(0.001));
  float s = 0.f;
  for (int i = 0; i < (1 << 26); ++i) s += 1e30f;  // the true sum is 6.7e37
  CHECK(s == std::ldexp(1.0f, 124));               // 2.13e37: then 1e30 is under half an ulp
}

TEST_CASE("random inputs: deterministic per seed, in range, special values placed") {
  CHECK(kl::uniform_floats(100, -1, 1, 5) == kl::uniform_floats(100, -1, 1, 5));
  CHECK(kl::uniform_floats(100, -1, 1, 5) != kl::uniform_floats(100, -1, 1, 6));
  for (float x : kl::uniform_floats(10000, -1, 1, 7)) CHECK((x >= -1.f && x < 1.f));
  std::set<float> seen;
  for (float x : kl::integer_floats(10000, -2, 2, 8)) seen.insert(x);
  CHECK(seen == std::set<float>{-2, -1, 0, 1, 2});
  auto v = kl::uniform_floats(1000, 0, 1, 9);
  kl::sprinkle(v, NAN, 5, 10);
  CHECK(std::count_if(v.begin(), v.end(), [](float x) { return std::isnan(x); }) >= 1);
  const auto g = kl::normal_floats(100000, 2.0, 3.0, 11);
  double mean = 0;
  for (float x : g) mean += x;
  CHECK(mean / g.size() == doctest::Approx(2.0).epsilon(0.02));
}

TEST_SUITE("gpu") {
  TEST_CASE("device buffer: upload, download, poison") {
    kl::DeviceBuffer<float> b(std::vector<float>{1, 2, 3});
    CHECK(b.download() == std::vector<float>{1, 2, 3});
    b.poison();
    for (float x : b.download()) CHECK(std::isnan(x));
    b.poison(0x7F);
    for (float x : b.download()) CHECK((std::isfinite(x) && x > 1e38f));
  }

  TEST_CASE("device info and the measured copy bandwidth are plausible") {
    const kl::DeviceInfo d = kl::device_info();
    CHECK(d.sms > 0);
    CHECK(d.l2_bytes > 0);
    CHECK(d.peak_fp32_tflops() > 1.0);
    const double gbps = kl::measure_copy_gbps(3);
    CHECK(gbps > 50.0);
    CHECK(gbps < 20000.0);
  }

  TEST_CASE("timer: a 2 ms busy-wait measures about 2 ms; short work is graph-replayed") {
    const kl::DeviceInfo d = kl::device_info();
    kl::Timer timer(d);
    const long long cycles = 2LL * d.sm_clock_khz;  // 2 ms at the peak clock
    auto spin = [&](cudaStream_t s) {
      spin_kernel<<<1, 1, 0, s>>>(cycles);
      CUDA_CHECK_LAUNCH();
    };
    spin(timer.stream());
    const kl::Timing slow = timer.time(spin, kl::TimingOptions{5});
    CHECK_FALSE(slow.graph);
    CHECK(slow.ms.count == 5);
    CHECK(slow.ms.median > 1.5);  // the clock can run below its peak, never above
    CHECK(slow.ms.median < 6.0);

    kl::DeviceBuffer<float> buf(1 << 20);
    auto memset_4m = [&](cudaStream_t s) { CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, 4 << 20, s)); };
    memset_4m(timer.stream());
    const kl::Timing fast = timer.time(memset_4m, kl::TimingOptions{25});
    CHECK(fast.graph);
    CHECK(fast.ms.count == 25);
    CHECK(fast.ms.min > 0);
    CHECK(fast.ms.min <= fast.ms.median);
    CHECK(fast.ms.median <= fast.ms.max);
  }

  TEST_CASE("max_nan and max_nan_1op agree on every pair of special values; combine on the GPU as on the host") {
    const std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN};
    std::vector<float> a, b;
    for (float x : v)
      for (float y : v) a.push_back(x), b.push_back(y);
    const int n = static_cast<int>(a.size());
    kl::DeviceBuffer<float> da(a), db(b), cs(n), oo(n), cb(n);
    max_probe<<<1, 1>>>(da.data(), db.data(), n, cs.data(), oo.data(), cb.data());
    CUDA_CHECK_LAUNCH();
    const auto c = cs.download(), o = oo.download(), comb = cb.download();
    for (int i = 0; i < n; ++i) {
      CAPTURE(a[i]);
      CAPTURE(b[i]);
      const float want = kl::max_nan(a[i], b[i]);
      CHECK(std::isnan(c[i]) == std::isnan(want));
      CHECK(std::isnan(o[i]) == std::isnan(want));
      if (!std::isnan(want)) {
        CHECK(c[i] == want);
        CHECK(o[i] == want);
      }
      const float host = kl::combine({a[i], 1.f}, {b[i], 2.f}).s;
      CHECK(std::isnan(comb[i]) == std::isnan(host));
      if (!std::isnan(host)) CHECK(comb[i] == doctest::Approx(host).epsilon(1e-6));
    }
  }

  TEST_CASE("warp and block all-reduce: every lane gets the sum and the NaN-propagating max") {
    for (int with_nan = 0; with_nan < 2; ++with_nan) {
      auto host = kl::integer_floats(256, -50, 50, kl::seed_for(12 + with_nan));
      if (with_nan) host[77] = NAN;  // in warp 2
      kl::DeviceBuffer<float> x(host), ws(256), wm(256), bs(256), bm(256);
      for (auto* b : {&ws, &wm, &bs, &bm}) b->poison(0x7F);
      reduce_probe<<<1, 256>>>(x.data(), ws.data(), wm.data(), bs.data(), bm.data());
      CUDA_CHECK_LAUNCH();
      const auto w_sum = ws.download(), w_max = wm.download(), b_sum = bs.download(), b_max = bm.download();
      for (int t = 0; t < 256; ++t) {
        CAPTURE(t);
        const float* warp = host.data() + (t / 32) * 32;
        const double ws_ref = kl::ref_sum(warp, 32).sum, wm_ref = kl::ref_max(warp, 32);
        const double bs_ref = kl::ref_sum(host.data(), 256).sum, bm_ref = kl::ref_max(host.data(), 256);
        CHECK(kl::scaled_error(w_sum[t], ws_ref, 1) == 0);
        CHECK(kl::scaled_error(w_max[t], wm_ref, 1) == 0);
        CHECK(kl::scaled_error(b_sum[t], bs_ref, 1) == 0);
        CHECK(kl::scaled_error(b_max[t], bm_ref, 1) == 0);
      }
    }
  }
}

// scripts/grade_test.py runs this case with the grading channel open and KL_SANITIZE set: main() has
// read the nonce and erased the variable, from environ and from the environment block the process
// started with; and KL_SANITIZE, read once, does not change when the code under test sets it.
TEST_CASE("grade channel: the nonce is out of reach and KL_SANITIZE is read once, at the start") {
  const bool at_start = kl::grade::sanitized();
  setenv("KL_SANITIZE", "1", 1);
  CHECK(kl::grade::sanitized() == at_start);
  unsetenv("KL_SANITIZE");
  CHECK(kl::grade::sanitized() == at_start);
  if (kl::grade::channel().fd < 0) return;
  CHECK(kl::grade::channel().nonce.size() >= 16);
  CHECK(std::getenv("KL_GRADE_CHANNEL") == nullptr);
  std::ifstream in("/proc/self/environ");
  const std::string block((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = block.find("KL_GRADE_CHANNEL=");
  REQUIRE(at != std::string::npos);
  const std::string value = block.substr(at + 17, block.find('\0', at) - at - 17);
  CHECK(value.find_first_not_of('x') == std::string::npos);
}
