// Checks of a prompt before it reaches the model: it is bytes of UTF-8 text that fit the context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace generate {

// The byte offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or std::string::npos when all of it is.
std::size_t first_invalid_utf8(const std::string& text);

// The prompt's bytes as tokens. Throws std::invalid_argument when the prompt is empty, is not UTF-8
// (naming the offset of the bad byte), or is longer than `context` bytes.
std::vector<std::int32_t> prompt_tokens(const std::string& prompt, int context);

}  // namespace generate
