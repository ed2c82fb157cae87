# cmake --install: libgpt2_onnx with the ONNX Runtime (and onnxruntime-genai) libraries it was built against beside
# it (its RUNPATH is $ORIGIN), the public headers, and a CMake package: find_package(gpt2_onnx CONFIG) then
# target_link_libraries(app PRIVATE gpt2_onnx::gpt2_onnx).
include(CMakePackageConfigHelpers)
set(package_dir "${CMAKE_INSTALL_LIBDIR}/cmake/gpt2_onnx")

install(TARGETS gpt2_onnx EXPORT gpt2_onnxTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(DIRECTORY include/gpt2_onnx DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${generated_include}/gpt2_onnx/config.hpp" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/gpt2_onnx")

# The runtime libraries, links included (install(DIRECTORY) keeps symbolic links as links).
get_filename_component(ort_lib_dir "${GPT2_ONNX_ORT_LIBRARY}" DIRECTORY)
install(DIRECTORY "${ort_lib_dir}/" DESTINATION "${CMAKE_INSTALL_LIBDIR}" FILES_MATCHING PATTERN "lib*.so*")
if(GPT2_ONNX_WITH_TEXT)
  get_filename_component(genai_lib_dir "${GPT2_ONNX_GENAI_LIBRARY}" DIRECTORY)
  install(DIRECTORY "${genai_lib_dir}/" DESTINATION "${CMAKE_INSTALL_LIBDIR}" FILES_MATCHING PATTERN "lib*.so*")
endif()

install(EXPORT gpt2_onnxTargets NAMESPACE gpt2_onnx:: DESTINATION "${package_dir}")
configure_package_config_file(cmake/gpt2_onnxConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/gpt2_onnxConfig.cmake"
  INSTALL_DESTINATION "${package_dir}" PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/gpt2_onnxConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gpt2_onnxConfig.cmake" "${CMAKE_CURRENT_BINARY_DIR}/gpt2_onnxConfigVersion.cmake"
  cmake/gpt2_onnx_dependencies.cmake DESTINATION "${package_dir}")
