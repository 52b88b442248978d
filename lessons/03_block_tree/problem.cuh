// Lesson 03 — block tree: the sum of n floats, and max, L2 norm and mean through the same template.
// The sum is the problem the three reduction lessons share, in common/sum_problem.cuh (the launcher
// signature and the CUB baseline); the references and tolerances of the other operations are in
// host.cuh.
#pragma once
#include "common/sum_problem.cuh"
