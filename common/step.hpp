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

// An entry of a step table by name: kl::step("wgmma", idea, launch_wgmma).needs(90).arch_specific(), each
// property written where it is not the default. It converts to the Step above, whose positional form
// {name, idea, launch, library, needs_sm, part, arch_specific} still compiles.
template <class Launch>
struct StepEntry {
  Step<Launch> st;
  constexpr StepEntry library() const {  // a library baseline, labelled "lib"
    StepEntry e = *this;
    e.st.library = true;
    return e;
  }
  constexpr StepEntry needs(int sm) const {  // runs on sm_<sm> and newer
    StepEntry e = *this;
    e.st.needs_sm = sm;
    return e;
  }
  constexpr StepEntry part(const char* p) const {  // of the lesson's problem `p` (07: "tile", "flash")
    StepEntry e = *this;
    e.st.part = p;
    return e;
  }
  constexpr StepEntry arch_specific() const {  // needs's architecture alone (sm_90a)
    StepEntry e = *this;
    e.st.arch_specific = true;
    return e;
  }
  constexpr operator Step<Launch>() const { return st; }  // NOLINT(google-explicit-constructor): a table entry
};

// The step `name` (what --step accepts) with its one-line idea (what --list prints) and its launcher.
template <class Launch>
constexpr StepEntry<Launch> step(const char* name, const char* idea, Launch launch) {
  return StepEntry<Launch>{Step<Launch>{name, idea, launch}};
}

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
