// gpt2_onnx: GPT-2 exports of gpt2-onnx in C++ applications. One include for the whole public API.
#pragma once

#include "gpt2_onnx/config.hpp"
#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/generator.hpp"
#include "gpt2_onnx/manifest.hpp"
#include "gpt2_onnx/model.hpp"
#include "gpt2_onnx/options.hpp"
#include "gpt2_onnx/sampling.hpp"
#include "gpt2_onnx/tokenizer.hpp"
