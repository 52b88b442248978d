// Lesson 10 — the step table (through the host, peer copies, peer access, the ring; then NCCL) that
// main.cu runs and test.cu checks. The steps are in steps/, one a file; the library row is here.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    through_host   every GPU copies to pinned host memory, the CPU adds, every GPU copies the sum back
//   2    peer_copies    GPU 0 gathers with cudaMemcpyPeerAsync, adds, and copies the sum to every GPU
//   3    peer_access    each GPU's kernel reads its 1/G share of every GPU over NVLink, adds, stores it into every GPU
//   4    ring           ring reduce-scatter + all-gather in slices: peer stores, flags, transfer and add overlapped
//   lib  nccl           ncclAllReduce, one communicator per GPU (ncclCommInitAll), NVLS off
#pragma once
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "lessons/10_across_gpus/problem.cuh"
#include "lessons/10_across_gpus/steps/01_through_host.cuh"
#include "lessons/10_across_gpus/steps/02_peer_copies.cuh"
#include "lessons/10_across_gpus/steps/03_peer_access.cuh"
#include "lessons/10_across_gpus/steps/04_ring.cuh"
#ifndef KL_NO_NCCL
#include <nccl.h>
#endif

namespace lesson10 {

#ifndef KL_NO_NCCL
inline void nccl_check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(call) + " failed: " + ncclGetErrorString(r));
}

// One communicator per GPU of the group, made by the first call (the untimed check run) and kept for
// the process: a sweep reuses them. NVLink SHARP (NVLS) stays off: it needs multicast objects, which
// this repository never creates, so NCCL_NVLS_ENABLE=0 is set before the first communicator.
inline ncclComm_t* nccl_comms(int gpus) {
  static ncclComm_t comms[kMaxGpus] = {};
  static int made = 0;
  if (made != gpus) {
    for (int i = 0; i < made; ++i) nccl_check(ncclCommDestroy(comms[i]), "ncclCommDestroy");
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    int devs[kMaxGpus];
    for (int i = 0; i < gpus; ++i) devs[i] = i;
    nccl_check(ncclCommInitAll(comms, gpus, devs), "ncclCommInitAll");
    made = gpus;
    CUDA_CHECK(cudaSetDevice(0));
  }
  return comms;
}

// The library row: one ncclAllReduce per GPU between ncclGroupStart and ncclGroupEnd (one thread
// drives every GPU), each on its GPU's stream, out of place as every step of the table.
inline void launch_nccl(Group& g, cudaStream_t s) {
  ncclComm_t* comms = nccl_comms(g.gpus);
  fork(g, s);
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < g.gpus; ++i)
    nccl_check(ncclAllReduce(g.in[i], g.out[i], g.n, ncclFloat, ncclSum, comms[i], g.stream[i]), "ncclAllReduce");
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  join(g, s);
}
constexpr bool kHaveNccl = true;
#else
inline void launch_nccl(Group&, cudaStream_t) { throw kl::NotSupported("built without NCCL"); }
constexpr bool kHaveNccl = false;
#endif

// kl::step(name, idea, launcher), .library() for the baseline (common/step.hpp).
inline const std::vector<AllReduceStep> kSteps = {
    kl::step("through_host", "every GPU copies to pinned host memory, the CPU adds, every GPU copies the sum back",
             launch_through_host),
    kl::step("peer_copies", "GPU 0 gathers with cudaMemcpyPeerAsync, adds, and copies the sum to every GPU",
             launch_peer_copies),
    kl::step("peer_access",
             "each GPU's kernel reads its 1/G share of every GPU over NVLink, adds, stores it into every GPU",
             launch_peer_access),
    kl::step("ring", "ring reduce-scatter + all-gather in slices: peer stores, flags, transfer and add overlapped",
             launch_ring),
    kl::step("nccl", "ncclAllReduce, one communicator per GPU (ncclCommInitAll), NVLS off", launch_nccl).library(),
};

}  // namespace lesson10
