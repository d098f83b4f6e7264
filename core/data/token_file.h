// Token ids from a file: NumPy .npy (1-D or C-ordered N-D, integer dtypes) or raw little-endian
// integers (u16, the nanoGPT train.bin layout; u32, i32, i64). The file is mapped, not read whole.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

 private:
  TokenFile() = default;
  std::string path_;
  TokenDType dtype_ = TokenDType::U16;
  const unsigned char* data_ = nullptr;  // first token
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::uint64_t count_ = 0;
};

// Writes `values` as a C-ordered little-endian int32 .npy array of `shape`.
void write_npy_i32(const std::string& path, const std::vector<std::int64_t>& shape,
                   const std::vector<std::int32_t>& values);

}  // namespace remat
