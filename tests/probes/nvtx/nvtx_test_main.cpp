// nvtx_test_main.cpp — main() of the NVTX test executables: attaches the test NVTX tool before the
// process makes its first NVTX call (NVTX reads NVTX_INJECTION64_PATH once, then), so the tests
// run the same from ctest and from a shell.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  ::setenv("NVTX_INJECTION64_PATH", HS_NVTX_INJECTION_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
