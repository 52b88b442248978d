// One entry of a lesson's step table, apart from the driver (common/ladder.hpp), so that a product file
// can hold its table and a step file can be included beside it without the command line or the timing.
#pragma once
#include <string>
#include <vector>

namespace kl {

// One entry of a lesson's step table. `Launch` is the lesson's launcher type.
template <class Launch>
struct Step {
  const char* name;  // the step's kernel, also what --step accepts
  const char* idea;  // one line: what this step changes, for --list
  Launch launch;
  bool library = false;        // a library baseline, labelled "lib"
  int needs_sm = 0;            // oldest GPU architecture it runs on (80 = sm_80); 0: any
  const char* part = nullptr;  // lessons with several problems (07: "tile", "flash"); else null
  // needs_sm's arch-specific features ("a": sm_90a's wgmma, setmaxnreg), whose code runs on that
  // architecture alone, not on newer ones: shown as sm_90a, and the launcher refuses other GPUs.
  bool arch_specific = false;
};

// What a step needs, as --list shows it: "any GPU", "sm_80+" (sm_80 or newer) or "sm_90a" (sm_90 alone).
template <class Launch>
std::string needs_text(const Step<Launch>& st) {
  if (!st.needs_sm) return "any GPU";
  return "sm_" + std::to_string(st.needs_sm) + (st.arch_specific ? "a" : "+");
}

// "1", "2", ... counting the lesson's own steps in order; "lib" for a library baseline.
template <class Launch>
std::string step_label(const std::vector<Step<Launch>>& steps, int i) {
  if (steps[i].library) return "lib";
  int n = 0;
  for (int j = 0; j <= i; ++j) n += steps[j].library ? 0 : 1;
  return std::to_string(n);
}

}  // namespace kl
