// nvtx_log.h — reads what the test NVTX tool (nvtx_injection.cpp) saw in this process.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

namespace hs::test {

/// Whether NVTX loaded the test tool into this process (it does on the first NVTX call).
inline void* nvtx_injection_handle() { return ::dlopen(HS_NVTX_INJECTION_PATH, RTLD_NOW | RTLD_NOLOAD); }

/// Every line the tool logged so far; empty when it is not loaded.
inline std::vector<std::string> nvtx_log() {
  void* handle = nvtx_injection_handle();
  if (!handle) return {};
  using LogFn = std::size_t (*)(char*, std::size_t);
  auto log = reinterpret_cast<LogFn>(::dlsym(handle, "hs_nvtx_injection_log"));
  std::vector<std::string> lines;
  if (log) {
    std::string text(log(nullptr, 0) + 1, '\0');
    text.resize(log(text.data(), text.size()));
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  ::dlclose(handle);
  return lines;
}

/// The lines logged after the first `from`.
inline std::vector<std::string> nvtx_log_since(std::size_t from) {
  auto lines = nvtx_log();
  return from < lines.size() ? std::vector<std::string>(lines.begin() + static_cast<std::ptrdiff_t>(from), lines.end())
                             : std::vector<std::string>{};
}

}  // namespace hs::test
