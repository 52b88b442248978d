// The step table every lesson prints, and the CSV rows it appends (one schema for all lessons):
//   lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu
#pragma once
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.cuh"
#include "common/stats.hpp"

namespace kl {

struct Limits {
  double copy_gbps = 0;    // measured device-to-device copy (read + write)
  double peak_tflops = 0;  // for compute-bound lessons
};

struct Row {
  std::string step;  // "1", "2", ... or "lib"; "copy" for the measured limit
  std::string name, dtype, shape;
  bool library = false;
  bool ok = true;           // false: the output was wrong; the row is FAILED and carries no time
  bool inaccurate = false;  // a library row whose error is over the limit: timed, marked, never a failure
  Summary ms;
  double bytes = 0;    // fewest bytes the problem must move (0: not memory-bound)
  double flops = 0;    // useful floating-point operations (0: not compute-bound)
  double err = 0;      // max error against the float64 reference
  bool graph = false;  // timed by CUDA-graph replay

  double gbps() const { return ok && bytes > 0 ? bytes / (ms.median * 1e-3) / 1e9 : NAN; }
  double tflops() const { return ok && flops > 0 ? flops / (ms.median * 1e-3) / 1e12 : NAN; }
  double pct_of(const Limits& l) const {
    if (bytes > 0) return 100.0 * gbps() / l.copy_gbps;
    if (flops > 0) return 100.0 * tflops() / l.peak_tflops;
    return NAN;
  }
};

// The check's verdict in a row: its error against the reference and whether that is within the
// limit. Without a check (--no-check) the error is NaN and the row is not FAILED. A library row over
// the limit is the vendor's answer, not ours (e.g. attention with S materialised in f16 at a large
// --scale): it is timed and marked inaccurate with its error, and does not fail the run.
template <class Error>
void record_check(Row& row, bool check, Error&& error, double limit) {
  row.err = check ? error() : NAN;
  const bool within = !check || row.err <= limit;
  row.inaccurate = row.library && !within;
  row.ok = within || row.library;
}

inline const char* kCsvHeader =
    "lesson,step,name,dtype,shape,ms_median,ms_min,ms_max,gbps,tflops,pct_of_limit,max_rel_err,gpu";

inline std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Commas would break the CSV: names never need them, so they become ';'.
inline std::string csv_text(std::string s) {
  for (auto& c : s)
    if (c == ',' || c == '\n') c = ';';
  return s;
}

inline std::string csv_line(const std::string& lesson, const Row& r, const Limits& l, const std::string& gpu) {
  std::ostringstream o;
  const double nan = NAN;
  o << lesson << ',' << csv_text(r.step) << ',' << csv_text(r.name) << ',' << r.dtype << ',' << csv_text(r.shape) << ','
    << csv_number(r.ok ? r.ms.median : nan) << ',' << csv_number(r.ok ? r.ms.min : nan) << ','
    << csv_number(r.ok ? r.ms.max : nan) << ',' << csv_number(r.gbps()) << ',' << csv_number(r.tflops()) << ','
    << csv_number(r.ok ? r.pct_of(l) : nan) << ',' << csv_number(r.err) << ',' << csv_text(gpu);
  return o.str();
}

// The measured copy bandwidth as a row of its own, so figures can draw the limit line.
inline Row copy_row(const Limits& l) {
  Row r{"copy", "device-to-device copy", "u8", "bytes=1073741824"};
  r.bytes = 1073741824.0;
  r.ms.median = r.ms.min = r.ms.max = r.bytes / (l.copy_gbps * 1e9) * 1e3;
  return r;
}

// Prints the rows of one shape: time, throughput, % of the limit, speed-up over step 1 and
// against the library row, and the error. A FAILED row shows its error and nothing else.
inline void print_table(std::ostream& os, const std::vector<Row>& rows, const Limits& l) {
  const Row* first = nullptr;
  const Row* lib = nullptr;
  for (const auto& r : rows) {
    if (!first && !r.library && r.ok) first = &r;
    if (!lib && r.library && r.ok) lib = &r;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-26s %10s %10s %10s %9s %7s %9s %8s %10s\n", "step", "name", "ms median",
                "ms min", "ms max", rows.empty() || rows[0].bytes > 0 ? "GB/s" : "TFLOP/s", "% limit", "x step 1",
                "x lib", "error");
  os << line;
  for (const auto& r : rows) {
    const std::string name = r.name + (r.graph ? " [g]" : "") + (r.inaccurate ? " [inaccurate]" : "");
    if (!r.ok) {
      std::snprintf(line, sizeof line, "%-4s %-26s %10s %10s %10s %9s %7s %9s %8s %10.2e\n", r.step.c_str(),
                    name.c_str(), "FAILED", "-", "-", "-", "-", "-", "-", r.err);
    } else {
      const double rate = r.bytes > 0 ? r.gbps() : r.tflops();
      std::snprintf(line, sizeof line, "%-4s %-26s %10.4f %10.4f %10.4f %9.1f %6.1f%% %9.2f %8.2f %10.2e\n",
                    r.step.c_str(), name.c_str(), r.ms.median, r.ms.min, r.ms.max, rate, r.pct_of(l),
                    first ? first->ms.median / r.ms.median : NAN, lib ? lib->ms.median / r.ms.median : NAN, r.err);
    }
    os << line;
  }
}

}  // namespace kl
