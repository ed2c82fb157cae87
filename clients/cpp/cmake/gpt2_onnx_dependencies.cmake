# Imported targets for what gpt2_onnx links, from folders laid out as ONNX Runtime's release archives (include/,
# lib/): gpt2_onnx::onnxruntime and, for the text layer, gpt2_onnx::onnxruntime_genai. clients/cpp/get-onnxruntime.sh
# fills third_party/onnxruntime and third_party/onnxruntime-genai so; the installed package config uses the same
# functions over the copies it installed beside libgpt2_onnx.

# gpt2_onnx::onnxruntime from LIB_DIR (and its headers from INCLUDE_DIR, where given); FATAL_ERROR where it is not.
function(gpt2_onnx_import_onnxruntime lib_dir include_dir)
  if(TARGET gpt2_onnx::onnxruntime)
    return()
  endif()
  find_library(GPT2_ONNX_ORT_LIBRARY NAMES onnxruntime libonnxruntime.so.1 PATHS "${lib_dir}" NO_DEFAULT_PATH)
  if(include_dir)
    find_path(GPT2_ONNX_ORT_INCLUDE_DIR onnxruntime_cxx_api.h PATHS "${include_dir}" NO_DEFAULT_PATH)
  endif()
  if(NOT GPT2_ONNX_ORT_LIBRARY)
    message(FATAL_ERROR "No ONNX Runtime library in ${lib_dir}: run clients/cpp/get-onnxruntime.sh "
                        "or pass -DONNXRUNTIME_ROOT=<folder with include/ and lib/>")
  endif()
  add_library(gpt2_onnx::onnxruntime SHARED IMPORTED GLOBAL)
  set_target_properties(gpt2_onnx::onnxruntime PROPERTIES IMPORTED_LOCATION "${GPT2_ONNX_ORT_LIBRARY}")
  if(GPT2_ONNX_ORT_INCLUDE_DIR)  # the build needs the headers; an installed package only the library
    set_target_properties(gpt2_onnx::onnxruntime PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${GPT2_ONNX_ORT_INCLUDE_DIR}")
  endif()
endfunction()

# gpt2_onnx::onnxruntime_genai from LIB_DIR, with its C header from INCLUDE_DIR where given (then required). Sets
# FOUND_VAR to TRUE or FALSE and REASON_VAR to why not.
function(gpt2_onnx_import_genai lib_dir include_dir found_var reason_var)
  set(${found_var} FALSE PARENT_SCOPE)
  find_library(GPT2_ONNX_GENAI_LIBRARY NAMES onnxruntime-genai PATHS "${lib_dir}" NO_DEFAULT_PATH)
  if(NOT GPT2_ONNX_GENAI_LIBRARY)
    set(${reason_var} "no onnxruntime-genai library (libonnxruntime-genai.so) in ${lib_dir}" PARENT_SCOPE)
    return()
  endif()
  if(include_dir)
    find_path(GPT2_ONNX_GENAI_INCLUDE_DIR ort_genai_c.h PATHS "${include_dir}" NO_DEFAULT_PATH)
    if(NOT GPT2_ONNX_GENAI_INCLUDE_DIR)
      set(${reason_var} "no onnxruntime-genai C header (ort_genai_c.h) in ${include_dir}" PARENT_SCOPE)
      return()
    endif()
  endif()
  if(NOT TARGET gpt2_onnx::onnxruntime_genai)
    add_library(gpt2_onnx::onnxruntime_genai SHARED IMPORTED GLOBAL)
    set_target_properties(gpt2_onnx::onnxruntime_genai PROPERTIES IMPORTED_LOCATION "${GPT2_ONNX_GENAI_LIBRARY}")
    if(GPT2_ONNX_GENAI_INCLUDE_DIR)
      set_target_properties(gpt2_onnx::onnxruntime_genai PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${GPT2_ONNX_GENAI_INCLUDE_DIR}")
    endif()
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(${reason_var} "" PARENT_SCOPE)
endfunction()
