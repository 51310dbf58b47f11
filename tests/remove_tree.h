// remove_tree.h — removing a test's scratch directory. Not std::filesystem::remove_all: the PyPI
// wheel's libtorch.so exports its own copy of it, which the dynamic linker binds first and which
// crashes (a null call) in any test executable that links LibTorch.
#pragma once

#include <ftw.h>

#include <cstdio>
#include <filesystem>

namespace hs::test {

/// Removes `dir` and everything under it, deepest first; a missing directory is no error.
inline void remove_tree(const std::filesystem::path& dir) {
  ::nftw(dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

}  // namespace hs::test
