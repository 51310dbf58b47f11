// kernel_names.cpp — see kernel_names.h.
#include "hybridscope/probes/kernel_names.h"

namespace hs::probes {

std::string short_kernel_name_of_demangled(const std::string& demangled) {
  // 1. Drop the parameter list: the first '(' outside template brackets.
  // 2. Drop template arguments outside nested brackets.
  std::string out;
  int depth = 0;
  for (char c : demangled) {
    if (c == '<') {
      ++depth;
      continue;
    }
    if (c == '>') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth > 0) continue;
    if (c == '(') break;
    out += c;
  }
  // 3. Drop the return type ("void ") and the namespaces and classes ("at::native::").
  const auto space = out.rfind(' ');
  if (space != std::string::npos) out = out.substr(space + 1);
  const auto scope = out.rfind("::");
  if (scope != std::string::npos) out = out.substr(scope + 2);
  return out.empty() ? demangled : out;
}

}  // namespace hs::probes
