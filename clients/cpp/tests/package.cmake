# The library as a customer gets it: tests/consumer is configured, built and run in a temporary folder, once against
# `cmake --install` of this build (find_package(gpt2_onnx CONFIG)) and once with add_subdirectory of these sources.
foreach(mode IN ITEMS find_package add_subdirectory)
  add_test(NAME package_consumer_${mode}
           COMMAND "${CMAKE_COMMAND}" "-DMODE=${mode}" "-DBUILD_DIR=${PROJECT_BINARY_DIR}"
                   "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}" "-DWORK=${CMAKE_CURRENT_BINARY_DIR}/consumer-${mode}"
                   "-DFOLDER=${fixtures}/pydocs-micro-fp32" "-DWITH_TEXT=${GPT2_ONNX_WITH_TEXT_VALUE}"
                   "-DONNXRUNTIME_ROOT=${ONNXRUNTIME_ROOT}" "-DONNXRUNTIME_GENAI_ROOT=${ONNXRUNTIME_GENAI_ROOT}"
                   "-DNLOHMANN_JSON_INCLUDE_DIR=${NLOHMANN_JSON_INCLUDE_DIR}"
                   -P "${PROJECT_SOURCE_DIR}/cmake/consumer_test.cmake")
  set_tests_properties(package_consumer_${mode} PROPERTIES TIMEOUT 600)
endforeach()
