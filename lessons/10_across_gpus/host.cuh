// Lesson 10, the executable's side: --n, --gpus and the sweep, the group of GPUs (buffers, streams,
// peer access), inputs whose sum shows the order of the adds, the float64 reference, the measured
// peer copy (the limit), the run of one shape, and the kl::Lesson that main.cu hands to the driver.
#pragma once
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/ladder.hpp"
#include "common/random.hpp"
#include "lessons/10_across_gpus/allreduce.cuh"

namespace lesson10 {

struct Shape {
  std::size_t n;  // floats per GPU
  int gpus;       // G, the GPUs of the group (0 where no GPU is visible: --list works without one)
  int visible;    // GPUs this process sees
};

constexpr std::size_t kDefaultN = std::size_t{1} << 26;  // 256 MiB per GPU

// GPUs visible to this process: 0 where there is none (the driver then ends with exit 77).
inline int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// --gpus: a whole number from 1 to the GPUs visible (larger is refused before any other GPU work);
// default: every visible GPU, at most kMaxGpus. `visible` < 0: not known yet.
inline int choose_gpus(std::optional<std::int64_t> asked, int visible) {
  if (!asked) return visible < kMaxGpus ? visible : kMaxGpus;
  if (*asked > kMaxGpus) throw kl::UsageError("--gpus: at most " + std::to_string(kMaxGpus) + " GPUs");
  if (visible > 0 && *asked > visible)
    throw kl::UsageError("--gpus " + std::to_string(*asked) + ": only " + std::to_string(visible) + " GPU" +
                         (visible == 1 ? "" : "s") + " visible");
  return static_cast<int>(*asked);
}

// Why a group cannot all-reduce, or "" when it can.
inline std::string group_missing(int gpus, int visible) {
  if (gpus >= 2) return "";
  return "needs 2 GPUs (" + (gpus == visible
                                 ? std::to_string(visible) + " visible)"
                                 : std::to_string(gpus) + " chosen of " + std::to_string(visible) + " visible)");
}

// --sweep: 4 KiB ... 1 GiB per GPU, every factor of 4.
inline std::vector<Shape> all_shapes(const kl::Args& a) {
  const int visible = visible_gpus();
  const int gpus = choose_gpus(a.size("gpus"), visible);
  std::vector<Shape> out;
  if (a.sweep)
    for (std::size_t bytes = 4096; bytes <= (std::size_t{1} << 30); bytes *= 4)
      out.push_back({bytes / 4, gpus, visible});
  else out.push_back({static_cast<std::size_t>(a.size("n").value_or(kDefaultN)), gpus, visible});
  return out;
}

// Every pair of the first G GPUs reads and writes the other's memory directly. Each pair is enabled
// once per process: enabling it again is an API error (cudaErrorPeerAccessAlreadyEnabled) that
// compute-sanitizer reports; NCCL may have enabled a pair first, which is the same error, cleared.
inline bool enable_peer_access(int gpus) {
  static std::set<std::pair<int, int>> enabled;
  for (int i = 0; i < gpus; ++i)
    for (int j = 0; j < gpus; ++j) {
      if (i == j || enabled.count({i, j})) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, i, j));
      if (!can) return false;
      CUDA_CHECK(cudaSetDevice(i));
      const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else CUDA_CHECK(e);
      enabled.insert({i, j});
    }
  CUDA_CHECK(cudaSetDevice(0));
  return true;
}

// The group's memory and streams for one n: owns what Group points to.
class GroupOwner {
 public:
  GroupOwner(int gpus, std::size_t n) {
    g.gpus = gpus;
    g.n = n;
    g.sms = kl::sm_count();
    g.peer_access = enable_peer_access(gpus);
    g.flag_count = 2 * (gpus - 1) * ring_grid(n, gpus, g.sms).slices;
    for (int i = 0; i < gpus; ++i) {
      OnGpu on(i);
      const std::size_t stride = (n + 63) / 64 * 64;  // each buffer 256-byte aligned: float4 loads anywhere
      float* p = nullptr;
      CUDA_CHECK(cudaMalloc(&p, 3 * stride * sizeof(float)));
      mem_.push_back(p);
      g.in[i] = p;
      g.out[i] = p + stride;
      g.recv[i] = p + 2 * stride;
      unsigned* f = nullptr;
      CUDA_CHECK(cudaMalloc(&f, (g.flag_count + 1) * sizeof(unsigned)));
      CUDA_CHECK(cudaMemset(f, 0, (g.flag_count + 1) * sizeof(unsigned)));
      flags_.push_back(f);
      g.launches[i] = f;
      g.flags[i] = f + 1;
      CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream[i], cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&g.done[i], cudaEventDisableTiming));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&g.forked, cudaEventDisableTiming));
    float* h = nullptr;
    CUDA_CHECK(cudaMallocHost(&h, (gpus + 1) * n * sizeof(float)));
    g.host = HostSum{h, h + gpus * n, n, gpus};
  }
  ~GroupOwner() {
    for (int i = 0; i < g.gpus; ++i) {
      OnGpu on(i);
      cudaStreamSynchronize(g.stream[i]);
      cudaStreamDestroy(g.stream[i]);
      cudaEventDestroy(g.done[i]);
      cudaFree(mem_[i]);
      cudaFree(flags_[i]);
    }
    cudaEventDestroy(g.forked);
    cudaFreeHost(const_cast<float*>(g.host.parts));
  }
  GroupOwner(const GroupOwner&) = delete;
  GroupOwner& operator=(const GroupOwner&) = delete;
  Group g;

 private:
  std::vector<float*> mem_;
  std::vector<unsigned*> flags_;
};

// GPU h's input: uniform in [-1, 1) times 2^((i + 5 h) mod 16 - 8), so that the G terms of an element
// differ by up to 2^15 in magnitude and the order of the adds shows in the low bits of the sum.
inline std::vector<float> input_of(std::size_t n, int h, std::uint64_t seed) {
  std::vector<float> x = kl::uniform_floats(n, -1.0, 1.0, seed + 7919 * h);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], static_cast<int>((i + 5 * h) % 16) - 8);
  return x;
}

// The float64 sum of an element over the G GPUs, and the sum of magnitudes that scales its error.
struct Reference {
  std::vector<double> sum, scale;
};

// Uploads each GPU's input and returns the float64 reference of the all-reduce.
inline Reference upload_inputs(Group& g, const std::vector<std::vector<float>>& inputs) {
  Reference r{std::vector<double>(g.n, 0.0), std::vector<double>(g.n, 0.0)};
  for (int h = 0; h < g.gpus; ++h) {
    const std::vector<float>& x = inputs[h];
    for (std::size_t i = 0; i < g.n; ++i) {
      r.sum[i] += x[i];
      r.scale[i] += std::fabs(static_cast<double>(x[i]));
    }
    CUDA_CHECK(cudaMemcpy(const_cast<float*>(g.in[h]), x.data(), g.n * sizeof(float), cudaMemcpyHostToDevice));
  }
  return r;
}

// Max over every GPU's output of |out - sum| / sum|x| (NaN and infinities must match exactly: an
// element that is not is an infinite error). Any order of G float adds is within (G-1) 2^-24.
inline double max_error(const Group& g, const Reference& r) {
  double worst = 0;
  std::vector<float> got(g.n);
  for (int h = 0; h < g.gpus; ++h) {
    CUDA_CHECK(cudaMemcpy(got.data(), g.out[h], g.n * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < g.n; ++i) {
      const double want = r.sum[i], x = got[i];
      double e;
      if (std::isnan(want) || std::isinf(want)) e = (std::isnan(want) ? std::isnan(x) : x == want) ? 0 : INFINITY;
      else e = std::isfinite(x) ? std::fabs(x - want) / (r.scale[i] > 0 ? r.scale[i] : 1.0) : INFINITY;
      worst = e > worst ? e : worst;
    }
  }
  return worst;
}
inline double tolerance(int gpus) { return gpus * std::ldexp(1.0, -24); }

// The limit: every GPU copies 256 MiB to the next GPU at once (cudaMemcpyPeerAsync, the copy engines),
// as a ring's step does; the bytes one GPU sends per second, median of 10 after 3 warm-up rounds.
inline double measure_peer_gbps(int gpus) {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<kl::DeviceBuffer<unsigned char>> src, dst;
  Group g;  // only its streams and events
  g.gpus = gpus;
  for (int i = 0; i < gpus; ++i) {
    OnGpu on(i);
    src.emplace_back(bytes);
    dst.emplace_back(bytes);
    CUDA_CHECK(cudaMemset(src.back().data(), 1, bytes));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream[i], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.done[i], cudaEventDisableTiming));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  CUDA_CHECK(cudaEventCreateWithFlags(&g.forked, cudaEventDisableTiming));
  const double ms = kl::median_ms(3, 10, [&] {  // events on GPU 0's legacy stream, which forks and joins
    fork(g, nullptr);
    for (int i = 0; i < gpus; ++i) {
      OnGpu on(i);
      const int next = (i + 1) % gpus;
      CUDA_CHECK(cudaMemcpyPeerAsync(dst[next].data(), next, src[i].data(), i, bytes, g.stream[i]));
    }
    join(g, nullptr);
  });
  for (int i = 0; i < gpus; ++i) {
    OnGpu on(i);
    CUDA_CHECK(cudaStreamDestroy(g.stream[i]));
    CUDA_CHECK(cudaEventDestroy(g.done[i]));
  }
  CUDA_CHECK(cudaEventDestroy(g.forked));
  return bytes / (ms * 1e-3) / 1e9;
}

// One n on the group: fresh inputs on every GPU, the float64 reference, then the chosen steps
// (kl::run_steps: n/a with the reason, or poison every output, run once, check, and time only a step
// that passed). A group of fewer than 2 GPUs shows every step n/a and runs nothing.
inline std::vector<kl::Row> run_shape(const Shape& sh, kl::Context<Launch>& cx) {
  const std::string missing = group_missing(sh.gpus, sh.visible);
  const double bytes = 4.0 * sh.n;
  std::printf("\nn = %zu floats (%.3f MiB) on each of %d GPUs\n", sh.n, bytes / (1 << 20), sh.gpus);
  kl::Trial t;
  t.proto = kl::Row{"", "", "f32", "n=" + std::to_string(sh.n) + ";gpus=" + std::to_string(sh.gpus)};
  t.proto.bytes = bytes * bus_factor(sh.gpus > 1 ? sh.gpus : 2);  // Row::gbps() is then the bus bandwidth
  if (!missing.empty()) {
    t.poison = [] {};
    t.error = [] { return 0.0; };
    t.tolerance = 0;
    return kl::run_steps(cx, t, [&](const AllReduceStep&, cudaStream_t) { throw kl::NotSupported(missing); });
  }
  GroupOwner owner(sh.gpus, sh.n);
  Group& g = owner.g;
  std::vector<std::vector<float>> inputs;
  for (int h = 0; h < g.gpus; ++h) inputs.push_back(input_of(sh.n, h, kl::seed_for(sh.n)));
  const Reference ref = upload_inputs(g, inputs);
  inputs.clear();
  t.poison = [&] {
    for (int h = 0; h < g.gpus; ++h) {
      OnGpu on(h);
      CUDA_CHECK(cudaMemset(g.out[h], 0xFF, sh.n * sizeof(float)));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  };
  t.error = [&] { return max_error(g, ref); };
  t.tolerance = tolerance(g.gpus);
  const std::vector<kl::Row> rows =
      kl::run_steps(cx, t, [&](const AllReduceStep& st, cudaStream_t s) { st.launch(g, s); });
  std::printf("algbw (4n bytes / time, GB/s):");
  for (const kl::Row& r : rows)
    if (r.ok) std::printf("  %s %.1f", r.step.c_str(), algbw_gbps(bytes, r.ms.median));
  std::printf("\n");
  return rows;
}

// The executable: its step table, options, shapes and run, for the driver (main.cu).
inline kl::Lesson<Launch, Shape> lesson() {
  kl::Lesson<Launch, Shape> l;
  l.id = "10";
  l.title = "across GPUs: all-reduce (sum) of n floats held on each of G GPUs, the sum on every GPU";
  l.steps = kSteps;
  l.options = {
      {"n", kl::Option::size, "floats per GPU (default 2^26 = 256 MiB); N or 2^K"},
      {"gpus", kl::Option::size, "GPUs of the group, 1 .. visible (default: every visible GPU, at most 8)", false},
  };
  l.sweep_help = "run 4 KiB, 16 KiB, ..., 1 GiB per GPU (every factor of 4) instead of one n";
  l.notes =
      "Needs 2 GPUs or more; with one, every step is n/a. GB/s is the bus bandwidth, algbw * 2 (G-1) / G.\n"
      "The limit is the measured peer copy: every GPU copying to the next at once.\n";
  l.slow_ms = 200.0;
  // No CUDA-graph replay: cudaMemcpyPeerAsync (step 2) cannot be captured. Every step is timed as a program
  // issues it, one launch per GPU between the timer's events; at small n that launch cost is in the time.
  l.graph_below_ms = 0;
  auto gpus = std::make_shared<int>(0);
  l.shapes = [gpus](const kl::Args& a) {
    std::vector<Shape> s = all_shapes(a);
    *gpus = s[0].gpus;
    return s;
  };
  l.device_bytes = [](const Shape& sh, const kl::Args&) { return sh.gpus > 1 ? 12.0 * sh.n : 0.0; };
  // Pinned: the G downloads and the sum; pageable: one input at a time, the reference (2 doubles an
  // element) and one download.
  l.host_bytes = [](const Shape& sh, const kl::Args&) {
    return sh.gpus > 1 ? 4.0 * sh.n * (2 * sh.gpus + 3) + 16.0 * sh.n : 0.0;
  };
  l.measure_limits = [gpus](kl::Limits& lim, const kl::DeviceInfo&) {
    if (*gpus < 2)
      return std::printf("limit:  peer copy n/a (%s)\n", group_missing(*gpus, visible_gpus()).c_str()), void();
    if (!enable_peer_access(*gpus))
      std::printf("(no peer access between these GPUs: the copies go through the host)\n");
    lim.copy_gbps = measure_peer_gbps(*gpus);
    std::printf("limit:  peer copy %.0f GB/s (every GPU to the next at once, bytes sent per GPU); %% limit uses it\n",
                lim.copy_gbps);
  };
  l.legend = [](const kl::Args&) -> std::string {
    return "GB/s:   bus bandwidth = algbw * 2 (G-1) / G, algbw = 4n bytes / time (NCCL's definitions)\n"
           "error:  max over GPUs and elements |out - float64 sum| / sum |x|; passes at <= G * 2^-24";
  };
  l.run = run_shape;
  return l;
}

}  // namespace lesson10
