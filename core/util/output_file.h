// One way to write a file, for every file RematLab writes (docs/trace-format.md, "Writing
// files"): the bytes go to a temporary file of ours next to the target, `.NAME.tmp-PID-N`,
// created new (never an existing file, never through a link), every write and the close
// checked; commit() then renames it over the target. Only a regular file with one link that is
// none of the command's inputs (compared by device and inode) is ever replaced: a device, FIFO,
// socket, directory or symbolic link in the target's place is refused with the reason, before
// anything is written and again at the commit. Nothing is ever opened at the target itself, so
// a FIFO there never blocks and a device there is never written to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace remat {

// A file's identity: its device and inode.
struct FileId {
  std::uint64_t dev = 0, ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

// The identity of the file at `path` (links followed); nullopt when there is none.
std::optional<FileId> file_id(const std::string& path);

// The files a command reads, by identity: a written file never replaces one of them.
struct InputFiles {
  // Adds `path` (an empty one, or one that does not exist, adds nothing); `what` names it in
  // messages, e.g. "--tokens".
  void add(const std::string& path, const std::string& what);
  // The name of the input `id` is, or empty.
  std::string which(const FileId& id) const;
  std::vector<std::pair<FileId, std::string>> files;
};

// Why a file of ours may not be written at `path`; empty when it may: nothing is there, or a
// regular file with one link that is none of `inputs`. `what` names the option in messages.
std::string why_not_writable(const std::string& path, const InputFiles& inputs = {}, const std::string& what = {});

// Throws Error unless why_not_writable(path) is empty and the directory it would be in exists.
void check_writable(const std::string& path, const InputFiles& inputs = {}, const std::string& what = {});

class OutputFile {
 public:
  // Checks the target and creates the temporary file; throws Error naming the file.
  explicit OutputFile(std::string path, InputFiles inputs = {}, std::string what = {});
  ~OutputFile();  // without commit(): the temporary file is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes all of it or throws Error naming the file and the reason (no space left, a file
  // size limit, ...).
  void write(const void* data, std::size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Closes (checked), checks the target again and renames the file into place.
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& why);
  std::string path_, tmp_, what_;
  InputFiles inputs_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `bytes` to `path` through an OutputFile.
void write_output_file(const std::string& path, const std::string& bytes, const InputFiles& inputs = {},
                       const std::string& what = {});

}  // namespace remat
