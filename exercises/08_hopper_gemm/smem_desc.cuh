// Exercise 08.1: the wgmma shared-memory descriptor of a 128-byte-swizzled tile.
//
// wgmma reads its operands from shared memory through a 64-bit descriptor, not a pointer: the
// tile's start address and two strides, each in units of 16 bytes, and the layout the copy engine
// wrote the tile in. Lesson 08's tiles are 128-byte swizzled: rows of 64 bf16 (128 bytes), 8 rows
// to a 1024-byte atom, within which row r's 16-byte chunk c sits at chunk c ^ (r % 8). The fields:
//
//   bits  0-13  start address >> 4   (a shared-memory address: only its low 18 bits count)
//   bits 16-29  leading byte offset >> 4   (LBO)
//   bits 32-45  stride byte offset >> 4    (SBO)
//   bits 49-51  base offset (0: every atom here starts 1024-byte aligned)
//   bits 62-63  layout: 0 none (interleaved), 1 128-byte swizzle, 2 64-byte, 3 32-byte
//
// make_desc(addr, leading, stride) gets the address and the two offsets in bytes. The grader's GEMM
// (step 2's kernel) calls it with leading = 16 and stride = 1024 for A (K-major: the SBO steps from
// one 8-row atom to the next) and leading = 8192, stride = 1024 for B (MN-major: the LBO steps from
// one 64-column panel to the next, the SBO 8 k-rows on). As written only the address is encoded:
// wgmma then reads both tiles as if unswizzled, with zero strides.
//
// TODO:
//   1. the leading byte offset, >> 4, in bits 16-29 (keep 14 bits of it);
//   2. the stride byte offset, >> 4, in bits 32-45 (keep 14 bits of it);
//   3. the layout: 128-byte swizzle. Shift in 64-bit arithmetic (a 32-bit 1 << 62 is undefined).
// Grade it: scripts/grade.sh 08.1
#pragma once
#include <cstdint>

__host__ __device__ inline std::uint64_t make_desc(std::uint32_t addr, std::uint32_t leading, std::uint32_t stride) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4);
}
