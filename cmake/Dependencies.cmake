# Libraries every build needs: OpenBLAS, nlohmann-json, CLI11 (and GoogleTest for tests).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
# Boost Graph (header-only parts): the optimal policy's minimum cut.
find_package(Boost 1.74 REQUIRED)

find_path(OPENBLAS_INCLUDE_DIR cblas.h
          PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas
                /usr/include/aarch64-linux-gnu/openblas-pthread
          NO_DEFAULT_PATH)
find_path(OPENBLAS_INCLUDE_DIR cblas.h)
find_library(OPENBLAS_LIBRARY NAMES openblas)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev")
endif()
add_library(remat_openblas INTERFACE)
target_include_directories(remat_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(remat_openblas INTERFACE ${OPENBLAS_LIBRARY})
message(STATUS "RematLab: OpenBLAS ${OPENBLAS_LIBRARY}")

if(REMAT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# SLEEF: SIMD math (tanh of soft-capped scores and logits), 1-ulp functions.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)
add_library(remat_sleef INTERFACE)
target_link_libraries(remat_sleef INTERFACE PkgConfig::SLEEF)
message(STATUS "RematLab: SLEEF ${SLEEF_VERSION}")

# Highway: portable SIMD with run-time dispatch (the CPU backend's element-wise and row kernels,
# compiled once per x86 target and chosen by the CPU at start-up).
pkg_check_modules(HWY REQUIRED IMPORTED_TARGET libhwy)
add_library(remat_hwy INTERFACE)
target_link_libraries(remat_hwy INTERFACE PkgConfig::HWY)
message(STATUS "RematLab: Highway ${HWY_VERSION}")

# oneDNN: bf16 GEMMs on the CPU's bf16 matrix units (AMX, AVX512-BF16) without widening the
# operands (cpu_dnnl.h). Debian builds it on OpenMP; libgomp is linked so the backend can hold
# oneDNN at one OpenMP thread in each of its own lanes.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY NAMES dnnl)
find_library(GOMP_LIBRARY NAMES gomp libgomp.so.1
             PATHS /usr/lib/gcc/x86_64-linux-gnu/12 /usr/lib/gcc/aarch64-linux-gnu/12)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY OR NOT GOMP_LIBRARY)
  message(FATAL_ERROR "oneDNN not found: install libdnnl-dev")
endif()
add_library(remat_dnnl INTERFACE)
target_include_directories(remat_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(remat_dnnl INTERFACE ${DNNL_LIBRARY} ${GOMP_LIBRARY})
message(STATUS "RematLab: oneDNN ${DNNL_LIBRARY}")

# Gloo: collectives between the ranks of a data-parallel run (TCP on loopback, FileStore
# rendezvous); PyTorch's CPU backend, a library rather than a runtime (no mpirun).
find_package(Gloo REQUIRED CONFIG)
add_library(remat_gloo INTERFACE)
target_link_libraries(remat_gloo INTERFACE gloo)
message(STATUS "RematLab: Gloo ${GLOO_VERSION}")
