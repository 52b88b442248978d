// Step 1: softmax, write the probabilities, sort each row, keep K. Lesson 04's softmax writes R x V
// probabilities, cub's segmented radix sort sorts every row with its indices, and a small kernel keeps
// the first K of each row.
#pragma once
#include <cub/device/device_segmented_radix_sort.cuh>

#include <climits>
#include <cstdint>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "lessons/04_online_softmax/softmax.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// Row r's segment runs from offsets[r] to offsets[r + 1]; each element's value is its index in the row.
__global__ void sort_inputs(int* iota, int* offsets, std::int64_t rows, int vocab) {
  const std::int64_t n = rows * vocab;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    iota[i] = static_cast<int>(i % vocab);
    if (i % vocab == 0) offsets[i / vocab] = static_cast<int>(i);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) offsets[rows] = static_cast<int>(n);
}

// The first k of each sorted row become the answer.
template <class T>
__global__ void keep_first_k(const T* sorted, const int* iota_sorted, std::int64_t rows, int vocab, int k, float* prob,
                             int* idx) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * k) return;
  const std::int64_t from = i / k * vocab + i % k;
  prob[i] = kl::to_float(sorted[from]);
  idx[i] = iota_sorted[from];
}

// Reads R x V logits, writes R x V probabilities (lesson 04), then cub reads them and the indices
// and writes both sorted (radix sort: several passes), and we keep K per row: 3 to 5 times the
// bytes of one read of the logits. cub's radix sort is stable, so equal probabilities stay in
// index order.
template <class T>
void launch_unfused_t(const Problem& p, Workspace& ws, cudaStream_t s) {
  const std::int64_t n = p.rows * p.vocab;
  if (n >= INT_MAX) throw kl::NotSupported("cub's segmented sort counts items in int: R x V must be below 2^31");
  const T* probs = reinterpret_cast<const T*>(ws.probs.data());
  T* sorted = reinterpret_cast<T*>(ws.sorted.data());
  if (ws.prepared_rows != p.rows || ws.prepared_vocab != p.vocab || ws.prepared_dtype != p.dtype) {
    ws.probs.resize(n * sizeof(T));
    ws.sorted.resize(n * sizeof(T));
    ws.iota.resize(n);
    ws.iota_sorted.resize(n);
    ws.offsets.resize(p.rows + 1);
    probs = reinterpret_cast<const T*>(ws.probs.data());
    sorted = reinterpret_cast<T*>(ws.sorted.data());
    sort_inputs<<<kl::sm_count() * 8, 256, 0, s>>>(ws.iota.data(), ws.offsets.data(), p.rows, p.vocab);
    CUDA_CHECK_LAUNCH();
    ws.cub_bytes = 0;
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, ws.cub_bytes, probs, sorted, ws.iota.data(), ws.iota_sorted.data(), static_cast<int>(n),
        static_cast<int>(p.rows), ws.offsets.data(), ws.offsets.data() + 1, 0, static_cast<int>(sizeof(T) * 8), s));
    ws.cub_temp.resize(ws.cub_bytes);
    ws.prepared_rows = p.rows;
    ws.prepared_vocab = p.vocab;
    ws.prepared_dtype = p.dtype;
  }
  lesson04::softmax<T>(static_cast<const T*>(p.x), reinterpret_cast<T*>(ws.probs.data()), p.rows, p.vocab,
                       ws.softmax_ws, 1.f, s);
  std::size_t bytes = ws.cub_bytes;
  CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      ws.cub_temp.data(), bytes, probs, sorted, ws.iota.data(), ws.iota_sorted.data(), static_cast<int>(n),
      static_cast<int>(p.rows), ws.offsets.data(), ws.offsets.data() + 1, 0, static_cast<int>(sizeof(T) * 8), s));
  const std::int64_t out = p.rows * p.k;
  keep_first_k<T><<<static_cast<unsigned>((out + 255) / 256), 256, 0, s>>>(sorted, ws.iota_sorted.data(), p.rows,
                                                                           p.vocab, p.k, p.prob, p.idx);
  CUDA_CHECK_LAUNCH();
}

inline void launch_unfused(const Problem& p, Workspace& ws, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) { launch_unfused_t<decltype(t)>(p, ws, s); });
}

}  // namespace lesson05
