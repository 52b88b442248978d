// Lesson 01 — naive reductions: the sum of n floats. The problem is the one the three reduction
// lessons share, in common/sum_problem.cuh (the launcher signature, the CUB baseline); the float64
// reference and its tolerance, --n and the sweep, and the run for one n are in common/sum_lesson.cuh.
#pragma once
#include "common/sum_problem.cuh"
