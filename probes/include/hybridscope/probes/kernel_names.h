// kernel_names.h — Nsight Systems' short form of a kernel's demangled name, shared by the CUPTI
// collector (which demangles CUPTI's names first) and the Kineto importer (whose names are
// demangled already).
#pragma once

#include <string>

namespace hs::probes {

/// "void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)" -> "vectorized_elementwise_kernel":
/// no return type, namespaces or classes, template arguments or parameter list. A name with none of
/// them comes back whole; so does one that would shorten to nothing.
std::string short_kernel_name_of_demangled(const std::string& demangled);

}  // namespace hs::probes
