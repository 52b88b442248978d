// Lesson 01 — naive reductions: the sum of n floats. The problem is the one the three reduction
// lessons share, in common/sum_problem.cuh: the launcher signature, the float64 reference and its
// tolerance, --n and the sweep, and the run for one n.
#pragma once
#include "common/sum_problem.cuh"
