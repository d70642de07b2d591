// SPDX-License-Identifier: Apache-2.0
// An application that uses Boost.Log itself loads gpuplug on demand, lets it log, unloads it, and
// goes on logging. Boost.Log's core is process-wide and outlives libgpuplug, so anything gpuplug
// left registered there (a sink whose formatter is code in libgpuplug) would be called after the
// unload: the application's next record would jump into unmapped memory (it did, before gpuplug
// stopped leaving a sink in the core). Checks: the library is unmapped after dlclose, and the
// application's records before and after reach its own sink, each once.
#include <dlfcn.h>
#include <gpuplug/log.hpp>

#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/trivial.hpp>
#include <boost/smart_ptr/make_shared_object.hpp>
#include <boost/core/null_deleter.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#ifndef GPUPLUG_TEST_LIBRARY
#error "GPUPLUG_TEST_LIBRARY (the path of the installed libgpuplug.so) must be defined"
#endif

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

bool mapped(std::string_view path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(path) != std::string::npos) return true;
  }
  return false;
}

std::size_t count(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// gpuplug::log(LogLevel, std::string_view, std::string_view) (Itanium mangling): reached through
// dlsym, since linking libgpuplug would keep it loaded.
constexpr const char* log_symbol =
    "_ZN7gpuplug3logENS_8LogLevelESt17basic_string_viewIcSt11char_traitsIcEES4_";

}  // namespace

int main() {
  namespace blog = boost::log;
  // The application's own sink, on a string stream.
  auto text = boost::make_shared<std::ostringstream>();
  auto backend = boost::make_shared<blog::sinks::text_ostream_backend>();
  backend->add_stream(text);
  backend->auto_flush(true);
  auto sink = boost::make_shared<blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>>(backend);
  sink->set_formatter(blog::expressions::stream << blog::expressions::smessage);
  blog::core::get()->add_sink(sink);

  BOOST_LOG_TRIVIAL(warning) << "app: before gpuplug";
  void* lib = dlopen(GPUPLUG_TEST_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("FAILED: dlopen %s: %s\n", GPUPLUG_TEST_LIBRARY, dlerror());
    return 1;
  }
  using log_fn = void (*)(gpuplug::LogLevel, std::string_view, std::string_view) noexcept;
  auto* gpuplug_log = reinterpret_cast<log_fn>(dlsym(lib, log_symbol));
  check(gpuplug_log != nullptr, "dlsym gpuplug::log");
  if (gpuplug_log != nullptr) gpuplug_log(gpuplug::LogLevel::warning, "unload-test", "gpuplug: a warning");
  check(dlclose(lib) == 0, "dlclose");
  check(!mapped(GPUPLUG_TEST_LIBRARY), "libgpuplug is unmapped after dlclose");

  BOOST_LOG_TRIVIAL(warning) << "app: after gpuplug";  // crashed while a gpuplug sink stayed
  sink->flush();
  const std::string got = text->str();
  check(count(got, "app: before gpuplug") == 1, "the application's record before gpuplug, once");
  check(count(got, "gpuplug: a warning") == 1, "gpuplug's warning reached the application's sink, once");
  check(count(got, "app: after gpuplug") == 1, "the application's record after the unload, once");
  if (failures != 0) std::printf("the application's sink holds:\n%s", got.c_str());
  return failures == 0 ? 0 : 1;
}
