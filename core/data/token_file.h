// Token ids from a file: NumPy .npy (1-D or C-ordered N-D, integer dtypes) or raw little-endian
// integers (u16, the nanoGPT train.bin layout; u32, i32, i64). The file is read where a window
// lies (pread on the descriptor opened once), not whole and not mapped: a file cut short while a
// run reads it ends the run with an Error naming it, where a mapping would kill it (SIGBUS).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/util/output_file.h"

namespace remat {

enum class TokenDType { U8, U16, I16, U32, I32, I64, U64 };
// "u8" | "u16" | "i16" | "u32" | "i32" | "i64" | "u64"; throws ConfigError otherwise.
TokenDType token_dtype_from_string(const std::string& s);
const char* to_string(TokenDType t);

class TokenFile {
 public:
  // `dtype` is for raw files ("" means u16); a .npy file says its own dtype (and `dtype`, when
  // given, must agree). Throws Error naming the file and what is wrong.
  static std::shared_ptr<const TokenFile> open(const std::string& path, const std::string& dtype = "");
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  std::uint64_t size() const { return count_; }  // tokens
  TokenDType dtype() const { return dtype_; }
  const std::string& path() const { return path_; }
  // Token i (i < size()); a negative id or one past int32 is returned as -1.
  std::int64_t at(std::uint64_t i) const;
  // Tokens [first, first + n) into `out`, each as at() gives it. Throws Error naming the file
  // when they lie past its end, or when the file has become shorter than when it was opened.
  void read(std::uint64_t first, std::size_t n, std::vector<std::int64_t>& out) const;

 private:
  TokenFile() = default;
  std::int64_t decode(const unsigned char* p) const;
  std::string path_;
  TokenDType dtype_ = TokenDType::U16;
  int fd_ = -1;
  std::uint64_t file_bytes_ = 0;   // when opened
  std::uint64_t data_offset_ = 0;  // of the first token
  std::uint64_t count_ = 0;
};

// Writes `values` as a C-ordered little-endian int32 .npy array of `shape`, through an
// OutputFile (never over anything but a regular file that is none of `inputs`).
void write_npy_i32(const std::string& path, const std::vector<std::int64_t>& shape,
                   const std::vector<std::int32_t>& values, const InputFiles& inputs = {},
                   const std::string& what = {});

}  // namespace remat
