// A wrong technique for exercise 08.1, kept to test the grader: the leading and stride byte offsets
// are put in each other's fields. For A (K-major) the 8-row atoms then sit 16 bytes apart; for B the
// next 8 k-rows are looked for a panel (8 KiB) away. It must fail the check.
#pragma once
#include <cstdint>

__host__ __device__ inline std::uint64_t make_desc(std::uint32_t addr, std::uint32_t leading, std::uint32_t stride) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((stride >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((leading >> 4) & 0x3FFF) << 32 | std::uint64_t{1} << 62;
}
