# FindConcurrentQueue: moodycamel's lock-free queues (header-only; Debian's
# libconcurrentqueue-dev ships no CMake config). Defines the imported target
# ConcurrentQueue::ConcurrentQueue and ConcurrentQueue_FOUND. Installed with
# Symphony, so that find_package(symphony COMPONENTS runtime) finds it too.
find_path(ConcurrentQueue_INCLUDE_DIR concurrentqueue/concurrentqueue.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ConcurrentQueue REQUIRED_VARS ConcurrentQueue_INCLUDE_DIR)
if(ConcurrentQueue_FOUND AND NOT TARGET ConcurrentQueue::ConcurrentQueue)
  add_library(ConcurrentQueue::ConcurrentQueue INTERFACE IMPORTED)
  set_target_properties(ConcurrentQueue::ConcurrentQueue PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${ConcurrentQueue_INCLUDE_DIR}")
endif()
mark_as_advanced(ConcurrentQueue_INCLUDE_DIR)
