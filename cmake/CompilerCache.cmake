# ccache, where it is installed, in front of every compiler of every preset (C, C++, CUDA; gcc
# and clang). Its cache stays where ccache keeps it (~/.cache/ccache, or CCACHE_DIR), outside any
# checkout, so the next build of another clone on the same machine reuses it: paths are taken
# relative to the source tree (base_dir) and the build directory is left out of the hash
# (hash_dir off), so a clone elsewhere hits the same entries. -DREMAT_CCACHE=OFF builds without
# it; a launcher given on the command line (CMAKE_<LANG>_COMPILER_LAUNCHER) is kept as it is.
option(REMAT_CCACHE "Put ccache in front of the compilers when it is installed" ON)
set(REMAT_CCACHE_STATUS "off")
if(REMAT_CCACHE)
  find_program(REMAT_CCACHE_PROGRAM ccache)
  if(REMAT_CCACHE_PROGRAM)
    set(_remat_ccache ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        ${REMAT_CCACHE_PROGRAM})
    foreach(lang C CXX CUDA)
      if(NOT CMAKE_${lang}_COMPILER_LAUNCHER)
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${_remat_ccache})
      endif()
    endforeach()
    set(REMAT_CCACHE_STATUS "${REMAT_CCACHE_PROGRAM}")
  else()
    set(REMAT_CCACHE_STATUS "not found (builds compile everything; apt-get install ccache)")
  endif()
endif()
