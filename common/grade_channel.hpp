// The channel through which a test binary tells scripts/grade.py its verdicts, out of reach of the
// code it grades. grade.py starts the binary with KL_GRADE_CHANNEL="R W": fd R holds a random nonce
// (grade.py writes it and closes its end), fd W takes the verdict lines. main() calls start() before
// any test runs: it reads the nonce, closes R and erases the variable, so code that runs later (a
// student's kernel launcher) cannot learn the nonce from the environment, the command line or an open
// file. Every line the harness writes to W starts with the nonce; grade.py counts any other line, and
// any line seen twice, as a forgery. Printing "grade ..." to stdout proves nothing any more.
// start() also decides, once, whether the run is under compute-sanitizer (KL_SANITIZE): a submission
// that calls setenv later cannot switch the timing off.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kl::grade {

struct Channel {
  int fd = -1;        // where verdict lines go; -1 when not run by grade.py
  std::string nonce;  // what starts each of them
  bool sanitize = false;
};

inline Channel& channel() {
  static Channel c;
  return c;
}

// Reads the nonce and latches KL_SANITIZE. Called by main() first thing; a second call does nothing.
inline void start() {
  static bool started = false;
  if (started) return;
  started = true;
  Channel& c = channel();
  c.sanitize = std::getenv("KL_SANITIZE") != nullptr;
  char* spec = std::getenv("KL_GRADE_CHANNEL");
  if (!spec) return;
  int r = -1, w = -1;
  if (std::sscanf(spec, "%d %d", &r, &w) != 2 || r < 0 || w < 0) {
    std::fprintf(stderr, "grade channel: KL_GRADE_CHANNEL is not \"R W\"\n");
    std::exit(2);
  }
  char buf[128];
  std::size_t got = 0;
  for (ssize_t n; got < sizeof buf - 1 && (n = ::read(r, buf + got, sizeof buf - 1 - got)) != 0;) {
    if (n < 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(r);
  buf[got] = '\0';
  c.nonce.assign(buf, std::strcspn(buf, "\n"));
  // The variable's text lives in the process's initial environment block, which /proc/self/environ
  // shows: overwrite it there as well as dropping it from environ.
  std::memset(spec, 'x', std::strlen(spec));
  ::unsetenv("KL_GRADE_CHANNEL");
  if (c.nonce.size() < 16) {
    std::fprintf(stderr, "grade channel: no nonce on fd %d\n", r);
    std::exit(2);
  }
  ::fcntl(w, F_SETFD, FD_CLOEXEC);
  c.fd = w;
}

inline bool sanitized() { return channel().sanitize; }

// One verdict line, written whole (one write of at most a pipe's atomic size).
inline void send(const std::string& text) {
  const Channel& c = channel();
  if (c.fd < 0) return;
  const std::string line = c.nonce + ' ' + text + '\n';
  if (::write(c.fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    std::fprintf(stderr, "grade channel: writing a verdict failed\n");
}

}  // namespace kl::grade
