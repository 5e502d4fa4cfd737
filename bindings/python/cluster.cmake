# symphony._cluster: the cluster's frontend client (symphony::cluster) for
# Python, wrapped by symphony/cluster.py. Included by CMakeLists.txt here when
# the cluster extension is built (UCX found); it needs no libtorch.
pybind11_add_module(symphony_python_cluster MODULE NO_EXTRAS src/cluster.cc)
set_target_properties(symphony_python_cluster PROPERTIES
  OUTPUT_NAME _cluster
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/symphony
  INTERPROCEDURAL_OPTIMIZATION OFF)
target_link_libraries(symphony_python_cluster PRIVATE symphony::cluster symphony_internal)
target_compile_options(symphony_python_cluster PRIVATE -Wno-conversion -Wno-shadow -Wno-old-style-cast -Wno-pedantic)
