// The ring's schedule checked on the CPU (lesson 10's test and exercise 10.1): step 4's kernel run on
// paper for G GPUs, each chunk a set of GPUs whose inputs it holds. Host code only, no GPU needed.
#pragma once
#include <string>
#include <vector>

#include "lessons/10_across_gpus/parts.cuh"

namespace lesson10 {

// Plays the 2 (G-1) steps of the ring with the schedule S (S::chunk, S::role) as the kernel does:
// at step t every GPU reads what its predecessor stored at step t - 1 (recv for a partial sum, out for
// a full one) and stores into its successor. Returns the first fault in words, or "" when every GPU
// ends with every chunk summed over all G inputs, each input once.
template <class S>
std::string simulate_ring(int gpus) {
  using Mask = unsigned;  // bit h: GPU h's input is in the sum
  const Mask all = (Mask{1} << gpus) - 1;
  struct Slot {
    Mask mask = 0;
    int step = -1;  // the step that stored it
  };
  std::vector<std::vector<Slot>> recv(gpus, std::vector<Slot>(gpus)), out = recv;
  const auto at = [&](int g, int t) { return "GPU " + std::to_string(g) + " at step " + std::to_string(t); };
  for (int t = 0; t < 2 * (gpus - 1); ++t) {
    struct Store {
      bool to_out;
      int gpu, chunk;
      Slot slot;
    };
    std::vector<Store> stores, reads;
    for (int g = 0; g < gpus; ++g) {
      const int c = S::chunk(g, t, gpus), next = (g + 1) % gpus;
      if (c < 0 || c >= gpus) return at(g, t) + ": chunk " + std::to_string(c) + " is not one of 0 .. G-1";
      const Role role = S::role(t, gpus);
      const Slot& got = role == Role::forward ? out[g][c] : recv[g][c];
      if (role != Role::send_own && got.step != t - 1)
        return at(g, t) + " (G = " + std::to_string(gpus) + "): chunk " + std::to_string(c) +
               " was not stored here at step " + std::to_string(t - 1) + " (its predecessor sent another chunk)";
      if (role != Role::send_own) reads.push_back({role == Role::forward, g, c, got});
      Mask v = Mask{1} << g;
      if (role == Role::forward) v = got.mask;
      else if (role != Role::send_own) {
        if (got.mask & v) return at(g, t) + ": adds its own input to chunk " + std::to_string(c) + " twice";
        v |= got.mask;
      }
      const bool full = role == Role::add_keep || role == Role::forward;
      if (role == Role::add_keep) out[g][c] = {v, t};
      stores.push_back({full, next, c, {v, t}});
    }
    for (const Store& s : stores)
      for (const Store& r : reads)
        if (s.to_out == r.to_out && s.gpu == r.gpu && s.chunk == r.chunk)
          return at(s.gpu, t) + ": chunk " + std::to_string(s.chunk) + " is read while its predecessor stores into it";
    for (const Store& s : stores) (s.to_out ? out : recv)[s.gpu][s.chunk] = s.slot;
  }
  for (int g = 0; g < gpus; ++g)
    for (int c = 0; c < gpus; ++c)
      if (out[g][c].mask != all)
        return "G = " + std::to_string(gpus) + ": GPU " + std::to_string(g) + " ends with chunk " + std::to_string(c) +
               (out[g][c].mask ? " summed over some GPUs only" : " never written");
  return "";
}

}  // namespace lesson10
