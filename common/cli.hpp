// A small command-line parser: `--name value`, `--name=value` and bare `--flag`. Every mistake is a
// UsageError (exit 2 through guarded_main); unknown options are reported by finish().
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/check.cuh"

namespace kl {

// A value echoed in an error message, with control characters written as escapes (\n, \x01), so
// that the message stays one line.
inline std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class Cli {
 public:
  Cli(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0 || a.size() == 2) throw UsageError("unexpected argument '" + escaped(a) + "'");
      a = a.substr(2);
      const auto eq = a.find('=');
      if (a.find('\n') != std::string::npos) throw UsageError("unexpected argument '--" + escaped(a) + "'");
      if (eq != std::string::npos) {
        add(a.substr(0, eq), a.substr(eq + 1));
      } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        add(a, argv[++i]);
      } else {
        add(a, std::nullopt);
      }
    }
  }

  bool flag(const std::string& name) {
    auto v = take(name);
    if (!v) return false;
    if (*v) throw UsageError("--" + name + " takes no value (got '" + escaped(**v) + "')");
    return true;
  }

  std::optional<std::string> text(const std::string& name) {
    auto v = take(name);
    if (!v) return std::nullopt;
    if (!*v) throw UsageError("--" + name + " needs a value");
    return **v;
  }

  // A positive whole number, written as digits or as a power of two ("2^26"), at most `most`.
  std::int64_t size(const std::string& name, std::int64_t fallback, std::int64_t most = kMaxSize) {
    auto v = text(name);
    return v ? parse_size("--" + name, *v, most) : fallback;
  }

  std::string choice(const std::string& name, const std::string& fallback, const std::vector<std::string>& allowed) {
    auto v = text(name);
    if (!v) return fallback;
    for (const auto& a : allowed)
      if (*v == a) return *v;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw UsageError("--" + name + " must be one of " + list + " (got '" + escaped(*v) + "')");
  }

  // Call after reading every known option.
  void finish() const {
    if (!opts_.empty()) throw UsageError("unknown option --" + escaped(opts_.begin()->first) + " (see --help)");
  }

  static constexpr std::int64_t kMaxSize = std::int64_t{1} << 50;

  // Digits or 2^E; refused (never clamped) above `most`.
  // A finite float option value ("0.5", "-2", "1e-3"); anything else (text, inf, nan, past float's
  // range) is refused with one line.
  static float parse_float(const std::string& what, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || std::fabs(v) > 3e38)
      throw UsageError(what + " must be a finite number (got '" + escaped(s) + "')");
    return static_cast<float>(v);
  }

  static std::int64_t parse_size(const std::string& what, const std::string& s, std::int64_t most = kMaxSize) {
    const std::string shown = escaped(s);
    const auto caret = s.find('^');
    std::uint64_t v = 0;
    if (caret != std::string::npos) {
      if (s.substr(0, caret) != "2") throw UsageError(what + ": only powers of two may use '^' (got '" + shown + "')");
      const std::uint64_t e = digits(what, s.substr(caret + 1), shown);
      if (e > 62) throw UsageError(what + ": " + shown + " is too large (at most " + std::to_string(most) + ")");
      v = std::uint64_t{1} << e;
    } else {
      v = digits(what, s, shown);
      if (v == 0) throw UsageError(what + " must be at least 1 (got 0)");
    }
    if (v > static_cast<std::uint64_t>(most))
      throw UsageError(what + ": " + shown + " is too large (at most " + std::to_string(most) + ")");
    return static_cast<std::int64_t>(v);
  }

 private:
  // A whole number written as decimal digits (0 allowed: the caller decides).
  static std::uint64_t digits(const std::string& what, const std::string& s, const std::string& shown) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(what + " must be a positive whole number (got '" + shown + "')");
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE || s.size() > 19) throw UsageError(what + ": " + shown + " is too large");
    return v;
  }

  void add(const std::string& name, std::optional<std::string> value) {
    if (!opts_.emplace(name, std::move(value)).second) throw UsageError("--" + name + " given twice");
  }
  std::optional<std::optional<std::string>> take(const std::string& name) {
    auto it = opts_.find(name);
    if (it == opts_.end()) return std::nullopt;
    auto v = it->second;
    opts_.erase(it);
    return v;
  }
  std::map<std::string, std::optional<std::string>> opts_;
};

// Runs an executable's body and turns what it throws into one line on stderr and an exit code:
// 2 for bad input, 77 for no GPU, 1 for anything else (a CUDA error names its call, file, line).
inline int guarded_main(const char* prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << prog << ": " << escaped(e.what()) << "\n";
    return 2;
  } catch (const NoDevice& e) {
    std::cerr << prog << ": " << e.what() << "\n";
    return 77;
  } catch (const std::exception& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kl
