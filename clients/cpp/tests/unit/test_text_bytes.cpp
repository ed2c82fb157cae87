// The byte-level pieces of the file check and the text stream: SHA-256 (src/sha256.hpp) against FIPS 180-4's
// examples, and where a UTF-8 byte string may be cut (src/utf8.hpp).
#include <gtest/gtest.h>

#include <string>

#include "sha256.hpp"
#include "utf8.hpp"

namespace gpt2_onnx::detail {
namespace {

std::string digest(const std::string& text) {
  Sha256 hash;
  hash.update(text.data(), text.size());
  return hash.hex_digest();
}

TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, GivesTheSameDigestHoweverTheBytesArrive) {
  const std::string text(1000, 'x');
  Sha256 pieces;
  for (size_t at = 0; at < text.size(); at += 7) pieces.update(text.data() + at, std::min<size_t>(7, text.size() - at));
  EXPECT_EQ(pieces.hex_digest(), digest(text));
}

TEST(Utf8, HoldsBackOnlyAnUnfinishedCharacter) {
  const std::string tokyo = "\xE6\x9D\xB1";  // U+6771, three bytes
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a" + tokyo), 4u);
  EXPECT_EQ(complete_utf8_prefix("a" + tokyo.substr(0, 1)), 1u);
  EXPECT_EQ(complete_utf8_prefix("a" + tokyo.substr(0, 2)), 1u);
  EXPECT_EQ(complete_utf8_prefix("caf\xC3"), 3u);                 // e-acute's first byte
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);           // three of an emoji's four bytes
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);       // the whole emoji
}

TEST(Utf8, NeverHoldsBackBytesThatCannotComplete) {
  EXPECT_EQ(complete_utf8_prefix("a\x80"), 2u);          // a stray continuation byte
  EXPECT_EQ(complete_utf8_prefix("a\xFF"), 2u);          // never valid in UTF-8
  EXPECT_EQ(complete_utf8_prefix("\x80\x80\x80\x80"), 4u);
}

}  // namespace
}  // namespace gpt2_onnx::detail
