// Lesson 09, the problem as the executable and the tests see it: lesson 07's (host.cuh there) named in
// lesson09, and only what differs: one part (no tile problem), so no --part. The problem as the kernels
// see it is problem.cuh.
#pragma once
#include <string>
#include <vector>

#include "common/ladder.hpp"
#include "lessons/07_wmma_attention/host.cuh"
#include "lessons/09_hopper_attention/problem.cuh"

namespace lesson09 {

using lesson07::all_rows;       // 0 ... B·H·S - 1, the rows the tests check
using lesson07::bytes;          // Q, K, V read once, O written once
using lesson07::fill_inputs;    // Q, K, V uniform with unit variance, seeded by the shape
using lesson07::flash_problem;  // (B, H, S, D, causal), scale 1/sqrt(D)
using lesson07::flops;          // 4 B H S^2 D, half when causal
using lesson07::kFloor;
using lesson07::kRel;  // passes at max |o - ref| / (|ref| + kFloor) <= kRel
using lesson07::max_error;
using lesson07::reference;      // float64 on the CPU (test shapes)
using lesson07::reference_gpu;  // f32 on the GPU, on sampled rows (the executable's large shapes)
using lesson07::sample_rows;
using lesson07::to_floats;

// The CSV's shape column, as lesson 07's flash rows: "BxHxSxD=16x16x4096x64", ";causal" when so.
inline std::string shape_text(const Problem& p) { return lesson07::shape_text({lesson07::Part::flash, p}); }

// The shapes of a run, validated before any GPU work: one from --batch (16), --heads (16), --seq (4096),
// --dim (64) and --causal, or with --sweep lesson 07's flash sweep (S = 128 ... 16384, B = 65536 / S,
// H = 16, D = 64 and 128, causal and not). --scale (default 1/sqrt(D)) applies to both.
inline std::vector<Problem> shapes(const kl::Args& a) {
  kl::Args flash = a;
  if (!a.sweep) flash.texts["part"] = "flash";  // lesson 07's --sweep runs both parts: its tile shapes are dropped
  std::vector<Problem> out;
  for (const auto& [part, p] : lesson07::shapes(flash))
    if (part == lesson07::Part::flash) out.push_back(p);
  return out;
}

}  // namespace lesson09
