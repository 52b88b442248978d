// How every step is timed: after its untimed check run, R repetitions, each with the L2 cache flushed
// before it and CUDA events around it; we report the median, min and max. Steps shorter than
// the launch gap are captured once into a CUDA graph and replayed, so that the time is the
// GPU's work and not the CPU's launch cost.
#pragma once
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/report.hpp"
#include "common/stats.hpp"

namespace kl {

// Captures the work that launch(stream) enqueues into a CUDA graph and returns it instantiated,
// ready to replay with cudaGraphLaunch (the caller destroys it with cudaGraphExecDestroy). Short
// steps are timed this way, and the tests check that a step's repeated run can be captured.
template <class Launch>
cudaGraphExec_t capture_graph(cudaStream_t stream, Launch&& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch(stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

// Captures launch(stream), replays the graph once and waits for it.
template <class Launch>
void replay_once(cudaStream_t stream, Launch&& launch) {
  const cudaGraphExec_t exec = capture_graph(stream, launch);
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
}

// Reads (never writes) a buffer twice the L2 size, so the next step starts with a cold cache
// that holds only clean lines: no write-backs land inside the timed region.
static __global__ void flush_l2_kernel(const float4* buf, std::size_t n, float* sink) {
  float acc = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float4 v = buf[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1.f) *sink = acc;  // never true (the buffer is zero); keeps the loads alive
}

struct TimingOptions {
  int reps = 30;                // repetitions for a step
  double slow_ms = 200.0;       // a step slower than this gets only 3 repetitions
  double graph_below_ms = 0.1;  // a step faster than this is timed by graph replay
  // Runs the step back to back for this long before timing it: a GPU at its power limit lowers its
  // clock within tens of milliseconds, so a tensor-core step timed cold, or just after another one,
  // would be measured at another clock than its own sustained one. 0: no such warm-up.
  double warmup_ms = 0.0;
};

struct Timing {
  Summary ms;
  bool graph = false;
};

class Timer {
 public:
  explicit Timer(const DeviceInfo& dev) : flush_((2 * dev.l2_bytes + 15) / 16), sink_(1) {
    CUDA_CHECK(cudaMemset(flush_.data(), 0, flush_.size() * sizeof(float4)));
    CUDA_CHECK(cudaDeviceSynchronize());  // the timer's stream does not wait for the legacy stream
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  cudaStream_t stream() const { return stream_; }

  // --profile: time() runs the step once between cudaProfilerStart and cudaProfilerStop (what
  // `ncu --profile-from-start off` profiles) and measures nothing; the row's times are NaN.
  void profile_only(bool on) { profile_ = on; }
  bool profiling() const { return profile_; }

  // `launch(stream)` enqueues the step's whole work (memsets and kernels) on the given stream.
  // Call it after one untimed run of the step (its correctness check), which loaded the module
  // and let libraries allocate their workspace.
  template <class Launch>
  Timing time(Launch&& launch, const TimingOptions& opt) {
    if (profile_) return profiled(launch);
    if (opt.warmup_ms > 0) warm_up(launch, opt.warmup_ms);
    const double first = once([&] { launch(stream_); });
    Timing t;
    t.graph = first < opt.graph_below_ms;
    std::vector<double> ms;
    cudaGraphExec_t exec = nullptr;
    if (t.graph) {
      exec = capture_graph(stream_, launch);
      CUDA_CHECK(cudaGraphLaunch(exec, stream_));  // the graph's first upload stays untimed
    } else {
      ms.push_back(first);
    }
    const int reps = std::max(1, first > opt.slow_ms ? std::min(opt.reps, 3) : opt.reps);
    while (static_cast<int>(ms.size()) < reps) {
      ms.push_back(once([&] {
        if (t.graph) CUDA_CHECK(cudaGraphLaunch(exec, stream_));
        else launch(stream_);
      }));
    }
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    t.ms = summarize(ms);
    return t;
  }

 private:
  template <class Launch>
  Timing profiled(Launch&& launch) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaProfilerStart());
    launch(stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaProfilerStop());
    Timing t;
    t.ms = Summary{NAN, NAN, NAN, 0};
    return t;
  }

  // Launches the step until `ms` of GPU time have passed, in batches of 8 between waits.
  template <class Launch>
  void warm_up(Launch&& launch, double ms) {
    float spent = 0.f;
    while (spent < ms) {
      CUDA_CHECK(cudaEventRecord(start_, stream_));
      for (int i = 0; i < 8; ++i) launch(stream_);
      CUDA_CHECK(cudaEventRecord(stop_, stream_));
      CUDA_CHECK(cudaEventSynchronize(stop_));
      float batch = 0.f;
      CUDA_CHECK(cudaEventElapsedTime(&batch, start_, stop_));
      spent += batch;
    }
  }

  template <class Enqueue>
  double once(Enqueue&& enqueue) {
    const std::size_t n = flush_.size();
    flush_l2_kernel<<<sm_count() * 4, 512, 0, stream_>>>(flush_.data(), n, sink_.data());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(start_, stream_));
    enqueue();
    CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

  DeviceBuffer<float4> flush_;
  DeviceBuffer<float> sink_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool profile_ = false;
};

// Times a step whose check passed and stores the result in its row; a FAILED row keeps no time.
template <class Launch>
void time_if_ok(Timer& timer, Row& row, Launch&& launch, const TimingOptions& opt) {
  if (!row.ok) return;
  const Timing t = timer.time(launch, opt);
  row.ms = t.ms;
  row.graph = t.graph;
  // What scripts/profile.sh files the profiled kernels under (the step's row of a timed run).
  if (timer.profiling())
    std::printf("profiled: step %s, name %s, dtype %s, shape %s\n", row.step.c_str(), row.name.c_str(),
                row.dtype.c_str(), row.shape.c_str());
}

}  // namespace kl
