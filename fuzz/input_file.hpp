// The trainer's loaders read paths: each fuzz input is written to a file of this process's own
// (removed at exit), so that parallel fuzzing jobs never read each other's inputs.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fp8_fuzz {

class input_file {
 public:
  explicit input_file(const char* stem)
      : path_((std::filesystem::temp_directory_path() /
               (std::string(stem) + "." + std::to_string(::getpid()) + ".input"))
                  .string()) {}
  ~input_file() { std::remove(path_.c_str()); }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  // Replaces the file's contents with the input; aborts if that fails (a broken harness, not a finding).
  const std::string& write(const std::uint8_t* data, std::size_t size) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz harness: cannot write %s\n", path_.c_str());
      std::abort();
    }
    return path_;
  }

 private:
  std::string path_;
};

// What a loader may throw on bad input: its documented error, which derives from fp8::error. Anything
// else (std::bad_alloc, std::length_error, a JSON library's exception) escapes the harness and
// libFuzzer reports it as a crash with the input that caused it.
[[noreturn]] inline void foreign_exception(const char* what) {
  std::fprintf(stderr, "fuzz: an exception other than fp8::error escaped the loader: %s\n", what);
  std::abort();
}

}  // namespace fp8_fuzz
