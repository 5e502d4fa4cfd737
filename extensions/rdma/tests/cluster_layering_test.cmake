# The production cluster's sources, and those of the libraries it links
# (config/, partition/), include no simulator header (symphony/sim/,
# symphony/simtool/): their layering (docs/architecture.md#layers). The
# configure step checks the link side (extensions/rdma/cmake/check_layering.cmake).
#   cmake -DROOT=<source dir> -P cluster_layering_test.cmake
if(NOT ROOT)
  message(FATAL_ERROR "cluster_layering_test: pass -DROOT=<the source directory>")
endif()
set(dirs extensions/rdma/src extensions/rdma/include config partition)
set(files "")
foreach(d IN LISTS dirs)
  if(NOT IS_DIRECTORY "${ROOT}/${d}")
    message(FATAL_ERROR "cluster_layering_test: ${ROOT}/${d} is missing")
  endif()
  file(GLOB_RECURSE found "${ROOT}/${d}/*.cc" "${ROOT}/${d}/*.hpp" "${ROOT}/${d}/*.h")
  list(APPEND files ${found})
endforeach()
list(LENGTH files n)
if(n LESS 10)
  message(FATAL_ERROR "cluster_layering_test: found only ${n} source files under ${ROOT}")
endif()
set(bad "")
foreach(f IN LISTS files)
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]symphony/(sim|simtool)/")
  foreach(l IN LISTS lines)
    file(RELATIVE_PATH rel "${ROOT}" "${f}")
    string(APPEND bad "\n  ${rel}: ${l}")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "the production cluster (or a library it links) includes simulator headers; "
    "move what it needs to the core, partition/ or config/:${bad}")
endif()
message(STATUS "cluster_layering_test: ${n} files, no simulator include")
