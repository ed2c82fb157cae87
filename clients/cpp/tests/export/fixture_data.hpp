// The committed fixture exports and what fixtures/expectations.json (scripts/make_fixtures.py) says of them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpt2_onnx::testing {

inline const std::filesystem::path kFixtures = GPT2_ONNX_FIXTURES_DIR;

inline const nlohmann::json& expectations() {
  static const nlohmann::json data = [] {
    std::ifstream in(kFixtures / "expectations.json");
    return nlohmann::json::parse(in);
  }();
  return data;
}

// A fixture's folder name, printed by GoogleTest (and so named in ctest) by its precision: ".../fp32".
struct FixtureName {
  std::string folder;  // "pydocs-micro-fp32"
  operator const std::string&() const { return folder; }
};
inline void PrintTo(const FixtureName& name, std::ostream* out) {
  *out << name.folder.substr(name.folder.rfind('-') + 1);
}

inline std::vector<FixtureName> fixture_names() {
  std::vector<FixtureName> names;
  for (const auto& [name, _] : expectations().at("exports").items()) names.push_back({name});
  return names;
}

inline const nlohmann::json& fixture(const std::string& name) { return expectations().at("exports").at(name); }

inline std::vector<int64_t> ids(const nlohmann::json& list) { return list.get<std::vector<int64_t>>(); }

// A fresh copy of a fixture folder under a temporary folder of the test's own (`tag`), for tests that damage it;
// the next run replaces it, so the copies do not pile up.
inline std::filesystem::path copy_of(const std::string& name, const std::string& tag) {
  const auto target = std::filesystem::temp_directory_path() / ("gpt2_onnx_test_" + tag) / name;
  std::filesystem::remove_all(target);
  std::filesystem::create_directories(target.parent_path());
  std::filesystem::copy(kFixtures / name, target, std::filesystem::copy_options::recursive);
  return target;
}

// Rewrites one byte of a file in place (same size, other content).
inline void flip_byte(const std::filesystem::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char byte = static_cast<char>(f.get() ^ 0x5A);
  f.seekp(at);
  f.put(byte);
}

}  // namespace gpt2_onnx::testing
