// POSIX file access: open without blocking, fstat before reading, write/fsync/rename with checks.
#include "file_io.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trainer {

namespace {

std::string system_reason() { return std::strerror(errno); }

// Closes a descriptor on every path out of a function.
class descriptor {
 public:
  explicit descriptor(int fd) : fd_(fd) {}
  ~descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  int get() const { return fd_; }
  // Closes now and reports whether the close succeeded (a failed close can mean lost data).
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

void write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw file_error("writing '" + path + "' failed: " + system_reason());
    }
    bytes += written;
    size -= std::size_t(written);
  }
}

std::string directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

std::vector<std::uint8_t> read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  descriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) throw file_error("cannot open '" + path + "': " + system_reason());
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw file_error("cannot inspect '" + path + "': " + system_reason());
  if (S_ISDIR(info.st_mode)) throw file_error("'" + path + "' is a directory, not a file");
  if (!S_ISREG(info.st_mode)) {
    throw file_error("'" + path +
                     "' is not a regular file (a device, FIFO or socket): refused, as reading it "
                     "might never end");
  }
  const std::uint64_t size = std::uint64_t(info.st_size);
  if (size > max_bytes) {
    throw file_error("'" + path + "' has " + std::to_string(size) + " bytes, more than the " +
                     std::to_string(max_bytes) + " this reader accepts");
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw file_error("reading '" + path + "' failed: " + system_reason());
    }
    if (got == 0) throw file_error("'" + path + "' became shorter while it was read");
    done += std::size_t(got);
  }
  return bytes;
}

void write_file_atomically(const std::string& path, const std::vector<byte_range>& parts) {
  const std::string temporary = path + temporary_suffix;
  try {
    descriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw file_error("cannot create '" + temporary + "': " + system_reason());
    for (const byte_range& part : parts) write_all(fd.get(), part.data, part.size, temporary);
    if (::fsync(fd.get()) != 0)
      throw file_error("flushing '" + temporary + "' to disk failed: " + system_reason());
    if (!fd.close()) throw file_error("closing '" + temporary + "' failed: " + system_reason());
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      throw file_error("cannot rename '" + temporary + "' to '" + path + "': " + system_reason());
    }
  } catch (const file_error&) {
    std::remove(temporary.c_str());
    throw;
  }
  // The rename is durable only once the directory entry is on disk too.
  const std::string directory = directory_of(path);
  descriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || ::fsync(dir.get()) != 0) {
    throw file_error("flushing the directory '" + directory + "' of '" + path +
                     "' to disk failed: " + system_reason());
  }
}

std::vector<std::string> remove_stale_temporaries(const std::string& directory,
                                                  const std::string& extension) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    if (path.extension() == temporary_suffix && path.stem().extension() == extension &&
        it->is_regular_file()) {
      std::error_code remove_error;
      if (fs::remove(path, remove_error)) removed.push_back(path.filename().string());
    }
  }
  return removed;
}

}  // namespace trainer
