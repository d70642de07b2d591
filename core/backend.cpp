// SPDX-License-Identifier: Apache-2.0
// The non-virtual parts of GpuBackend: loading a kernel module from a file.
#include <gpuplug/backend.hpp>
#include <gpuplug/support/files.hpp>
#include <optional>
#include <system_error>
#include <vector>

namespace gpuplug {

namespace {
// "load_module_file: module axpy: cannot read '/x/axpy.so': <reason>"
[[noreturn]] void file_error(std::string_view backend, Status status, std::string_view module,
                             const std::filesystem::path& file, std::string_view reason) {
  std::string message = "module ";
  message.append(module).append(": cannot read '").append(file.string()).append("': ");
  message.append(reason);
  throw Error(status, std::string(backend), "load_module_file", std::move(message));
}
}  // namespace

void GpuBackend::load_module_file(std::string_view name, const std::filesystem::path& file) {
  // Classify first so the message says what is wrong with the path, not just "open failed".
  std::error_code ec;
  const auto st = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(st)) {
    file_error(this->name(), Status::not_found, name, file,
               ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file");
  }
  if (std::filesystem::is_directory(st)) {
    file_error(this->name(), Status::invalid_argument, name, file, "is a directory");
  }
  std::string why;
  const std::optional<std::vector<std::byte>> bytes = support::read_file(file, why);
  if (!bytes) file_error(this->name(), Status::invalid_argument, name, file, why);
  load_module(name, *bytes);
}

}  // namespace gpuplug
