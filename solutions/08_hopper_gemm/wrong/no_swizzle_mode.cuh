// A wrong technique for exercise 08.1, kept to test the grader: the offsets are right but the layout
// bits are left at 0 ("no swizzle"), so wgmma reads the swizzled tiles as plain 8 x 16-byte core
// matrices and multiplies scrambled k values. It must fail the check.
#pragma once
#include <cstdint>

__host__ __device__ inline std::uint64_t make_desc(std::uint32_t addr, std::uint32_t leading, std::uint32_t stride) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((leading >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((stride >> 4) & 0x3FFF) << 32;
}
