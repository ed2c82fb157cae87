# The programs end to end: the golden check (on GPT2_ONNX_EXPORT, and the quantized export where one is named), the
# run command's JSON and refusals, and the benchmark's JSON shape (a smoke run: timings are never asserted).
function(expect_test name program args status output)
  add_test(NAME ${name} COMMAND "${CMAKE_COMMAND}" "-DPROGRAM=$<TARGET_FILE:${program}>" "-DARGS=${args}"
                                "-DEXPECT_STATUS=${status}" "-DEXPECT_OUTPUT=${output}" "-DEXPECT_ALSO=${ARGN}"
                                -P "${expect}")
endfunction()

set(fp32 "${fixtures}/pydocs-micro-fp32")
expect_test(decode_bench_runs gpt2_onnx_decode_bench "${fp32}|--prompt|8|--new|4|--rounds|2|--warmup|1" 0
            "decode ms/token" "prefill ms")
add_test(NAME decode_bench_json
         COMMAND "${CMAKE_COMMAND}" "-DPROGRAM=$<TARGET_FILE:gpt2_onnx_decode_bench>" "-DFOLDER=${fp32}"
                 -P "${PROJECT_SOURCE_DIR}/cmake/check_bench_json.cmake")
expect_test(decode_bench_rejects_bad_arguments gpt2_onnx_decode_bench "${fp32}|--rounds|0" 2
            "gpt2_onnx_decode_bench: --rounds takes an integer >= 1, not '0'")
expect_test(run_rejects_bad_options gpt2_onnx_run "run|${fp32}|--prompt|x|--top-p|1.5" 2
            "gpt2_onnx_run: top_p must be in (0, 1], not 1.5")
expect_test(run_rejects_a_folder_without_export gpt2_onnx_run "run|${fixtures}|--prompt|x" 2
            "gpt2_onnx_run: '${fixtures}' has no manifest.json")
if(NOT EXISTS "${ONNXRUNTIME_ROOT}/lib/libonnxruntime_providers_cuda.so")
  expect_test(run_refuses_cuda_where_absent gpt2_onnx_run "run|${fp32}|--prompt|x|--provider|cuda|--json" 3
              "has no CUDA provider")
endif()
if(GPT2_ONNX_WITH_TEXT)
  expect_test(run_greedy_json gpt2_onnx_run
              "run|${fp32}|--prompt|The return value of the function is|--max-new-tokens|16|--json" 0
              [=["ids":[262,198,220,220,220,220,220,220,220,220,220,220,220,220,220,220]]=]
              [=["finish_reason":"length"]=])
  expect_test(run_rejects_a_prompt_beyond_the_context gpt2_onnx_run
              "run|${fp32}|--prompt|The return value of the function is|--max-new-tokens|125" 2
              "more than the model's context of 128 positions")
else()
  expect_test(run_says_text_is_unavailable gpt2_onnx_run "run|${fp32}|--prompt|x" 3 "built without the text layer")
endif()

# Both are CACHE PATH (CMakeLists.txt): an untyped relative -D value is already absolute against where cmake ran.
# One typed on the command line (-DGPT2_ONNX_EXPORT:PATH=rel) stays relative, and the tests run elsewhere: refused.
foreach(variable IN ITEMS GPT2_ONNX_EXPORT GPT2_ONNX_EXPORT_QUANTIZED)
  if(NOT ${variable})
    continue()
  endif()
  if(NOT IS_ABSOLUTE "${${variable}}")
    message(FATAL_ERROR "${variable}=${${variable}} is relative: give an absolute path, or give it untyped "
                        "(-D${variable}=DIR) so that CMake makes it absolute against the folder cmake runs in")
  elseif(NOT EXISTS "${${variable}}/manifest.json")
    message(FATAL_ERROR "${variable}=${${variable}} has no manifest.json: not an export folder")
  endif()
endforeach()
if(GPT2_ONNX_EXPORT)
  set(export_dir "${GPT2_ONNX_EXPORT}")
  # The default way: one map of the weights file, prepacked once for both sessions (see WeightLoading).
  expect_test(golden_check gpt2_golden_check "${export_dir}" 0 "golden check passed"
              "shared by both sessions, prepacked once for both")
  # The other two ways must compute the same.
  expect_test(golden_check_shared_unpacked gpt2_golden_check "${export_dir}|--weights|shared-unpacked|--no-batch" 0
              "golden check passed" "shared by both sessions, prepacking off")
  expect_test(golden_check_per_session gpt2_golden_check "${export_dir}|--weights|per-session|--no-batch" 0
              "golden check passed" "prepacked by ONNX Runtime for each session")

  # The check must also fail when it should: a golden.json whose first expected token is wrong.
  set(tampered "${CMAKE_CURRENT_BINARY_DIR}/tampered_golden.json")
  add_test(NAME tamper_golden COMMAND "${CMAKE_COMMAND}" "-DIN=${export_dir}/golden.json" "-DOUT=${tampered}"
           -P "${PROJECT_SOURCE_DIR}/cmake/tamper_golden.cmake")
  set_tests_properties(tamper_golden PROPERTIES FIXTURES_SETUP tampered_golden)
  expect_test(golden_check_rejects_wrong_tokens gpt2_golden_check "${export_dir}|--golden|${tampered}|--no-batch" 1
              "case 0: tokens differ at step 0")
  set_tests_properties(golden_check_rejects_wrong_tokens PROPERTIES FIXTURES_REQUIRED tampered_golden)
  # Each case's own logits_atol governs it (fp32 golden files set one per case from the fp32 rule).
  set(tightened "${CMAKE_CURRENT_BINARY_DIR}/tightened_golden.json")
  add_test(NAME tighten_golden COMMAND "${CMAKE_COMMAND}" "-DIN=${export_dir}/golden.json" "-DOUT=${tightened}"
           -P "${PROJECT_SOURCE_DIR}/cmake/tighten_golden.cmake")
  set_tests_properties(tighten_golden PROPERTIES FIXTURES_SETUP tightened_golden)
  expect_test(golden_check_applies_each_cases_limit gpt2_golden_check
              "${export_dir}|--golden|${tightened}|--no-batch" 1 "FAIL  case 0: top-5 logits max|d|")
  set_tests_properties(golden_check_applies_each_cases_limit PROPERTIES FIXTURES_REQUIRED tightened_golden)
else()
  message(STATUS "GPT2_ONNX_EXPORT not set: no golden check tests (clients/cpp/ci.sh sets it)")
endif()
if(GPT2_ONNX_EXPORT_QUANTIZED)
  # Quantized kernels give slightly different logits for prompt and decode shapes; the check's tolerance (the
  # export's golden logits_atol) and its tie-aware top-5 ranks must hold at realistic sizes too.
  add_test(NAME golden_check_quantized COMMAND gpt2_golden_check "${GPT2_ONNX_EXPORT_QUANTIZED}" --threads 2)
endif()
