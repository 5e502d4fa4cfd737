# symphony_internal: warnings and sanitizer flags for the project's own
# targets. Linked PRIVATE, so nothing here leaks to consumers of symphony::core.
add_library(symphony_internal INTERFACE)
target_compile_options(symphony_internal INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual)
if(SYMPHONY_WERROR)
  target_compile_options(symphony_internal INTERFACE -Werror)
endif()

if(SYMPHONY_SANITIZE)
  string(REPLACE ";" "," _symphony_san "${SYMPHONY_SANITIZE}")
  target_compile_options(symphony_internal INTERFACE
    -fsanitize=${_symphony_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(symphony_internal INTERFACE -fsanitize=${_symphony_san})
  target_compile_definitions(symphony_internal INTERFACE SYMPHONY_SANITIZED=1)
endif()

# symphony_torch_warnings: libtorch's and pybind11's headers do not survive
# the strictest of those warnings. Project targets that include them link it
# PRIVATE beside symphony_internal (or take its options per source file).
add_library(symphony_torch_warnings INTERFACE)
target_compile_options(symphony_torch_warnings INTERFACE
  -Wno-conversion -Wno-shadow -Wno-old-style-cast -Wno-pedantic)
