// The doctest runner of every test binary. Without --gpu it runs the CPU cases (everything outside
// the "gpu" suite); with --gpu it runs only the "gpu" suite, and exits 77 ("skipped" for ctest)
// when there is no CUDA device. Run by scripts/grade.py, it reports how the run ended on the grading
// channel (common/grade_channel.hpp): "nogpu", or "end RC" once every selected case has run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/device.cuh"
#include "common/grade_channel.hpp"

int main(int argc, char** argv) {
  kl::grade::start();
  std::vector<char*> args;
  bool gpu = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu") == 0) gpu = true;
    else args.push_back(argv[i]);
  }
  if (gpu) {
    try {
      const kl::DeviceInfo dev = kl::device_info();
      std::cout << "GPU tests on " << dev.name << "\n";
    } catch (const kl::NoDevice& e) {
      std::cout << "skipped: " << e.what() << "\n";
      kl::grade::send("nogpu");
      return 77;
    }
  }
  doctest::Context ctx(static_cast<int>(args.size()), args.data());
  if (gpu) ctx.addFilter("test-suite", "gpu");
  else ctx.addFilter("test-suite-exclude", "gpu");
  const int rc = ctx.run();
  kl::grade::send("end " + std::to_string(rc));
  return rc;
}
