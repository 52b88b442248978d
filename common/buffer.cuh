// DeviceBuffer<T>: owns n elements of device memory; upload, download, and poison so that an
// element the kernel forgot to write shows up in the check instead of passing by accident.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "common/check.cuh"

namespace kl {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  explicit DeviceBuffer(const std::vector<T>& host) { upload(host); }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates (contents lost) only when the buffer must grow.
  void resize(std::size_t n) {
    if (n <= n_ && ptr_ != nullptr) return;
    if (ptr_) CUDA_CHECK(cudaFree(ptr_));  // not even a null free while a stream is being captured
    ptr_ = nullptr;
    n_ = 0;
    CUDA_CHECK(cudaMalloc(&ptr_, (n > 0 ? n : 1) * sizeof(T)));
    n_ = n;
  }

  void upload(const std::vector<T>& host) {
    resize(host.size());
    CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());  // a pageable copy may still be in flight on return
  }

  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  std::vector<T> download() const { return download(n_); }

  // Fills every byte: 0xFF makes floats and halves NaN and integers -1 (the default poison);
  // 0x7F makes a huge finite float, for checks whose right answer is itself NaN. Waits for the
  // fill, so that work launched next on any stream (even a non-blocking one) sees the poison.
  void poison(int byte = 0xFF) {
    CUDA_CHECK(cudaMemset(ptr_, byte, n_ * sizeof(T)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace kl
