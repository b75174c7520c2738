# softverbs_dropin_library(<target> <output-name> <version-script>)
#
# A drop-in replacement for one of rdma-core's libraries: lib<output-name>.so.1
# built from every .cc of the calling directory (unsupported.cc holds weak
# EOPNOTSUPP stubs for the whole ABI; other files define the real functions
# that replace them, docs/abi.md), exporting exactly what the version script
# lists, and needing our libibverbs.so.1 as the real one does.
function(softverbs_dropin_library target output_name map)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  add_library(${target} SHARED ${sources})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${output_name}
    VERSION 1
    SOVERSION 1
    LINK_DEPENDS ${map})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  # The prototype check (docs/abi.md): an exported function defined without
  # rdma-core's declaration in sight (<infiniband/mlx5dv.h>, <infiniband/efadv.h>,
  # <rdma/rdma_cma.h>, <rdma/rsocket.h>...) does not compile, and one defined
  # with another prototype than the header's conflicts with it.
  target_compile_options(${target} PRIVATE -Werror=missing-declarations)
  target_link_options(${target} PRIVATE -Wl,--version-script=${map} -Wl,--no-undefined)
  target_link_libraries(${target} PRIVATE softverbs_ibverbs)
endfunction()
