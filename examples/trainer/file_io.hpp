// File input and output that cannot hang, cannot allocate without bound and cannot lose data
// silently: reads accept only regular files and read exactly their size; writes are checked, and a
// replaced file reaches the disk (file and directory synced) before it takes its final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainer {

// A file that cannot be read or written; what() names the file and the reason (from the system).
class file_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole content of a regular file. A directory, a FIFO, a device (/dev/zero) or a socket is
// refused before anything is read (a FIFO is opened without blocking), and a file larger than
// `max_bytes` is refused before anything is allocated. Throws file_error.
std::vector<std::uint8_t> read_regular_file(const std::string& path, std::uint64_t max_bytes);

// Writes `bytes` to `path` + ".tmp", syncs it, renames it to `path` and syncs the directory, so
// that after a crash `path` holds either its old content or the new one, never a torn file. Every
// write is checked; on failure the temporary file is removed and file_error says what failed.
struct byte_range {
  const void* data;
  std::size_t size;
};
void write_file_atomically(const std::string& path, const std::vector<byte_range>& parts);

// The suffix of the temporary file of write_file_atomically.
inline constexpr const char* temporary_suffix = ".tmp";

// Removes the temporary files an interrupted write_file_atomically of files named *`extension` left
// in `directory` (*`extension`.tmp, e.g. step_000100.safetensors.tmp); returns their names.
std::vector<std::string> remove_stale_temporaries(const std::string& directory, const std::string& extension);

}  // namespace trainer
