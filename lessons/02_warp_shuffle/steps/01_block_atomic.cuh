// Lesson 02, step 1: lesson 01's best step (steps/04_block_atomic.cuh there), reused, not copied:
// grid-stride partials, a shared-memory tree per block, one atomicAdd per block.
#pragma once
#include "lessons/01_naive_reduction/steps/04_block_atomic.cuh"
