// The doctest runner of every test binary. Without --gpu it runs the CPU cases (everything outside
// the "gpu" suite); with --gpu it runs only the "gpu" suite, and exits 77 ("skipped" for ctest)
// when there is no CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <iostream>
#include <vector>

#include "common/device.cuh"

int main(int argc, char** argv) {
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
      return 77;
    }
  }
  doctest::Context ctx(static_cast<int>(args.size()), args.data());
  if (gpu) ctx.addFilter("test-suite", "gpu");
  else ctx.addFilter("test-suite-exclude", "gpu");
  return ctx.run();
}
