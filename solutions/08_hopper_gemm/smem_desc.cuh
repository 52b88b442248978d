// Exercise 08.1, solved (see exercises/08_hopper_gemm for the task).
//
// Each field is a byte count >> 4 (wgmma addresses shared memory in 16-byte units), masked to its 14
// bits and shifted into place; the layout code 1 in bits 62-63 is the 128-byte swizzle that TMA wrote
// (CU_TENSOR_MAP_SWIZZLE_128B), so wgmma undoes the same XOR of chunk and row that the copy engine
// applied. The shifts are 64-bit: the offsets land above bit 31. Nothing here costs more than a few
// integer instructions, and the compiler folds most of them, since the offsets are constants.
#pragma once
#include <cstdint>

__host__ __device__ inline std::uint64_t make_desc(std::uint32_t addr, std::uint32_t leading, std::uint32_t stride) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((leading >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((stride >> 4) & 0x3FFF) << 32 | std::uint64_t{1} << 62;
}
