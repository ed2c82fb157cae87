#include "mapped_weights.hpp"

#include <cerrno>
#include <cstring>

#include "gpt2_onnx/errors.hpp"

#ifndef _WIN32
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace gpt2_onnx::detail {
namespace {

ONNXTensorElementDataType element_type(const std::string& dtype) {
  if (dtype == "float32") return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  if (dtype == "float16") return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
  if (dtype == "uint8") return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
  if (dtype == "int8") return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
  if (dtype == "int32") return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  if (dtype == "int64") return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  // check_weights_index refuses an unknown dtype before this is reached.
  throw ManifestError("weights_index: dtype '" + dtype + "' cannot be mapped");
}

}  // namespace

#ifdef _WIN32

bool weight_map_supported() { return false; }

MappedWeights::MappedWeights(const std::filesystem::path& file, const std::vector<WeightEntry>&) {
  throw RuntimeError("mapping " + file.string() + " is implemented for POSIX systems only");
}

MappedWeights::~MappedWeights() = default;

#else

bool weight_map_supported() { return true; }

MappedWeights::MappedWeights(const std::filesystem::path& file, const std::vector<WeightEntry>& index) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw MissingFileError("cannot open " + file.string() + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || info.st_size <= 0) {
    ::close(fd);
    throw ChangedFileError("cannot map " + file.string() + ": empty or unreadable");
  }
  size_ = static_cast<uint64_t>(info.st_size);
  data_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the map keeps the file
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw RuntimeError("cannot map " + file.string() + ": " + std::strerror(errno));
  }
  try {
    check_weights_index(index, size_);  // against the file as it is, not only the manifest's stated size
    const auto cpu = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
    for (const auto& entry : index) {
      // ONNX Runtime reads initializers only; the tensor type asks for a non-const pointer.
      void* bytes = static_cast<char*>(data_) + entry.offset;
      values_.push_back(Ort::Value::CreateTensor(cpu, bytes, entry.length, entry.shape.data(), entry.shape.size(),
                                                 element_type(entry.dtype)));
      names_.push_back(entry.name);
    }
  } catch (...) {
    values_.clear();
    ::munmap(data_, size_);
    throw;
  }
}

MappedWeights::~MappedWeights() {
  values_.clear();  // the views go before the memory they point into
  if (data_ != nullptr) ::munmap(data_, size_);
}

#endif

void MappedWeights::add_to(Ort::SessionOptions& options, bool prepacking) const {
  for (size_t i = 0; i < values_.size(); ++i) options.AddInitializer(names_[i].c_str(), values_[i]);
  if (!prepacking) options.AddConfigEntry("session.disable_prepacking", "1");
}

void MappedWeights::release_pages() const {
#ifndef _WIN32
  // A read-only shared file mapping: MADV_DONTNEED only unmaps the pages; their contents stay in the file.
  ::madvise(data_, size_, MADV_DONTNEED);
#endif
}

}  // namespace gpt2_onnx::detail
