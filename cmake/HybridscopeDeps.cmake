# Finds every dependency once, for all modules.
#
# LibTorch comes from the PyTorch wheel that scripts/install-deps.sh installs into a virtual
# environment outside the build tree; CMake asks that Python for torch.utils.cmake_prefix_path.
# Override with -DHS_PYTHON=/path/to/python (an existing PyTorch 2.x install, e.g. on a GPU
# machine) or -DTorch_DIR=... directly.
#
# With HS_BUILD_TRAINER=OFF only what probes and reports need is looked for (SQLite, nlohmann/json,
# threads, optionally CUPTI/NVTX and GoogleTest): Python and LibTorch are never asked for.

find_package(SQLite3 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)  # reports formats its tables with it, with or without the trainer

if(NOT HS_BUILD_TRAINER)
  # Optional here: the simulator (hs_sim) reads hardware descriptions with it; absent, hs_sim is
  # skipped and the rest of the analysing side still builds.
  find_package(yaml-cpp QUIET)
endif()

# The python of the venv scripts/install-deps.sh makes (LibTorch and the test-only peers):
# $HS_PYTHON, else $HS_DEPS_DIR/venv, else ~/.local/share/hybridscope/venv; "" when none exists.
function(hs_find_venv_python out)
  set(found "")
  if(DEFINED ENV{HS_PYTHON})
    set(found "$ENV{HS_PYTHON}")
  elseif(DEFINED ENV{HS_DEPS_DIR} AND EXISTS "$ENV{HS_DEPS_DIR}/venv/bin/python")
    set(found "$ENV{HS_DEPS_DIR}/venv/bin/python")
  elseif(EXISTS "$ENV{HOME}/.local/share/hybridscope/venv/bin/python")
    set(found "$ENV{HOME}/.local/share/hybridscope/venv/bin/python")
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(HS_BUILD_TRAINER)
  find_package(yaml-cpp REQUIRED)
  find_package(CLI11 REQUIRED)

  if(NOT HS_PYTHON)
    hs_find_venv_python(HS_PYTHON)
    if(NOT HS_PYTHON)
      set(HS_PYTHON python3)
    endif()
  endif()
  set(HS_PYTHON "${HS_PYTHON}" CACHE FILEPATH "Python whose torch provides LibTorch")

  if(NOT Torch_DIR)
    execute_process(
      COMMAND "${HS_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path, end='')"
      OUTPUT_VARIABLE HS_TORCH_PREFIX
      RESULT_VARIABLE HS_TORCH_RC
      ERROR_QUIET)
    if(NOT HS_TORCH_RC EQUAL 0)
      message(FATAL_ERROR
        "LibTorch not found: '${HS_PYTHON}' cannot import torch.\n"
        "Run scripts/install-deps.sh (installs the PyTorch wheel from PyPI), or pass "
        "-DHS_PYTHON=<python with torch> or -DTorch_DIR=<.../share/cmake/Torch>.")
    endif()
    list(APPEND CMAKE_PREFIX_PATH "${HS_TORCH_PREFIX}")
  endif()
  # The CUDA wheel's TorchConfig looks for the CUDA toolkit; on machines without one it still
  # configures a CPU-only build of our code.
  find_package(Torch REQUIRED)
  message(STATUS "hybridscope: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

  if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
    set(HS_TORCH_HAS_CUDA ON)
  else()
    set(HS_TORCH_HAS_CUDA OFF)
  endif()
endif()  # HS_BUILD_TRAINER

# Optional: the CUDA toolkit's CUPTI for hs_cupti (probes/CMakeLists.txt). Absent is fine.
if(HS_WITH_CUPTI)
  find_package(CUDAToolkit QUIET)
endif()

if(HS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(HS_BUILD_BENCH AND HS_BUILD_TRAINER)  # the micro-benchmarks live in bench/, built with the trainer
  find_package(benchmark REQUIRED)
endif()

# NVTX3 (header-only) from the CUDA toolkit: the probes' ranges also go to Nsight Systems.
# Another location: -DHS_NVTX3_INCLUDE_DIR=<directory holding nvtx3/>.
find_path(HS_NVTX3_INCLUDE_DIR nvtx3/nvToolsExt.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} "$ENV{CUDA_HOME}/include" "$ENV{CUDA_PATH}/include" /usr/local/cuda/include
  DOC "Directory holding nvtx3/nvToolsExt.h")
