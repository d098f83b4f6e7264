// Training on given token ids: .npy and raw files, the windows a batch takes, and bad files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/data/corpus.h"
#include "core/data/token_file.h"
#include "core/util/error.h"
#include "test_files.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

class TokenFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  template <class T>
  std::string raw(const std::string& name, const std::vector<T>& v) {
    std::ofstream(path(name), std::ios::binary).write(reinterpret_cast<const char*>(v.data()),
                                                       static_cast<std::streamsize>(v.size() * sizeof(T)));
    return path(name);
  }
  template <class T>
  std::string npy(const std::string& name, const char* descr, const std::vector<T>& v, const std::string& shape) {
    std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::ofstream f(path(name), std::ios::binary);
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(h.size()), 0};
    f.write(reinterpret_cast<const char*>(pre), 10);
    f << h;
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    return path(name);
  }
  testing::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

using testing::message_of;

TEST_F(TokenFileTest, ReadsNpyAndRawFilesOfEveryIntegerType) {
  std::vector<std::uint16_t> ids(100);
  std::iota(ids.begin(), ids.end(), 7);
  auto a = TokenFile::open(raw("t.bin", ids));
  auto b = TokenFile::open(npy("t.npy", "<u2", ids, "(100,)"));
  std::vector<std::int64_t> wide(ids.begin(), ids.end());
  auto c = TokenFile::open(npy("w.npy", "<i8", wide, "(10, 10)"));
  auto d = TokenFile::open(raw("w.bin", wide), "i64");
  for (const auto* f : {a.get(), b.get(), c.get(), d.get()}) {
    ASSERT_EQ(f->size(), 100u) << f->path();
    for (std::uint64_t i = 0; i < 100; ++i) EXPECT_EQ(f->at(i), static_cast<std::int64_t>(i + 7)) << f->path();
  }
  EXPECT_EQ(c->dtype(), TokenDType::I64);
  std::vector<std::int32_t> neg = {1, -5, 2};
  EXPECT_EQ(TokenFile::open(raw("n.bin", neg), "i32")->at(1), -1);
}

TEST_F(TokenFileTest, BatchesAreWindowsOfTheFileWithTheNextTokenAsTarget) {
  std::vector<std::uint16_t> ids(300);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint16_t>((i * 7) % 50);
  Corpus c = Corpus::from_tokens(TokenFile::open(raw("t.bin", ids)));
  std::vector<std::int32_t> tok, tgt, tok2, tgt2;
  const int B = 3, S = 16;
  c.batch(42, 5, B, S, 50, tok, tgt);
  for (int b = 0; b < B; ++b) {
    // Find the window: the first token's position is where the whole row matches.
    bool found = false;
    for (std::size_t off = 0; off + S < ids.size() && !found; ++off) {
      bool same = true;
      for (int i = 0; i < S && same; ++i)
        same = tok[b * S + i] == ids[off + i] && tgt[b * S + i] == ids[off + i + 1];
      found = same;
    }
    EXPECT_TRUE(found) << "row " << b << " is not a window of the file";
  }
  c.batch(42, 5, B, S, 50, tok2, tgt2);
  EXPECT_EQ(tok, tok2);  // keyed by seed and step
  c.batch(42, 6, B, S, 50, tok2, tgt2);
  EXPECT_NE(tok, tok2);
}

TEST_F(TokenFileTest, IdsOutsideTheVocabularyAndShortFilesAreRefused) {
  std::vector<std::uint16_t> ids(40, 3);
  ids[20] = 999;
  Corpus c = Corpus::from_tokens(TokenFile::open(raw("t.bin", ids)));
  std::vector<std::int32_t> tok, tgt;
  std::string m = message_of([&] {
    for (int step = 0; step < 50; ++step) c.batch(1, step, 2, 30, 256, tok, tgt);
  });
  EXPECT_NE(m.find("token 20 is 999"), std::string::npos) << m;
  EXPECT_NE(m.find("vocabulary [0, 256)"), std::string::npos) << m;
  m = message_of([&] { c.batch(1, 0, 1, 40, 1000, tok, tgt); });
  EXPECT_NE(m.find("fewer than one sequence"), std::string::npos) << m;
}

TEST_F(TokenFileTest, BadFilesAreRefusedNamingTheProblem) {
  std::vector<std::uint16_t> ids(10, 1);
  std::string m = message_of([&] { TokenFile::open(npy("f.npy", "<f4", ids, "(5,)")); });
  EXPECT_NE(m.find("'<f4'"), std::string::npos) << m;
  m = message_of([&] { TokenFile::open(npy("big.npy", "<u2", ids, "(1000,)")); });
  EXPECT_NE(m.find("longer than the file"), std::string::npos) << m;
  m = message_of([&] { TokenFile::open(npy("b.npy", ">u2", ids, "(10,)")); });
  EXPECT_NE(m.find("little-endian"), std::string::npos) << m;
  std::vector<std::uint8_t> odd(7, 1);
  m = message_of([&] { TokenFile::open(raw("odd.bin", odd)); });
  EXPECT_NE(m.find("whole number of u16"), std::string::npos) << m;
  m = message_of([&] { TokenFile::open(raw("fake.npy", odd)); });
  EXPECT_NE(m.find("not a .npy file"), std::string::npos) << m;
  m = message_of([&] { TokenFile::open(npy("t.npy", "<u2", ids, "(10,)"), "i32"); });
  EXPECT_NE(m.find("disagrees"), std::string::npos) << m;
  EXPECT_THROW(token_dtype_from_string("f32"), ConfigError);
  m = message_of([&] { TokenFile::open(path("absent.bin")); });
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  std::ofstream(path("empty.bin"));
  EXPECT_THROW(TokenFile::open(path("empty.bin")), Error);
}

TEST_F(TokenFileTest, WrittenNpyReadsBack) {
  std::vector<std::int32_t> v = {5, 6, 7, 8, 9, 10};
  write_npy_i32(path("d.npy"), {2, 3}, v);
  auto f = TokenFile::open(path("d.npy"));
  ASSERT_EQ(f->size(), 6u);
  EXPECT_EQ(f->dtype(), TokenDType::I32);
  for (std::uint64_t i = 0; i < 6; ++i) EXPECT_EQ(f->at(i), v[i]);
  std::ifstream in(path("d.npy"), std::ios::binary);
  std::string head(10, '\0');
  in.read(head.data(), 10);
  const std::size_t hlen = static_cast<unsigned char>(head[8]) | (static_cast<unsigned char>(head[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);  // NumPy aligns the data to 64 bytes
}

TEST_F(TokenFileTest, AFileCutShortWhileARunReadsItEndsTheRunNamingIt) {
  // Read through the descriptor, not a mapping: a mapping would die of SIGBUS here.
  std::vector<std::uint16_t> v(4096);
  std::iota(v.begin(), v.end(), std::uint16_t{0});
  const std::string file = raw("cut.bin", v);
  auto f = TokenFile::open(file);
  auto c = Corpus::from_tokens(f);
  std::vector<std::int32_t> tok, tgt;
  c.batch(1, 0, 4, 64, 65536, tok, tgt);
  ASSERT_EQ(::truncate(file.c_str(), 100), 0);
  const std::string m = message_of([&] {
    for (int step = 1; step < 64; ++step) c.batch(1, step, 4, 64, 65536, tok, tgt);
  });
  EXPECT_NE(m.find(file), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  EXPECT_NE(message_of([&] { f->at(4000); }).find("truncated"), std::string::npos);
  EXPECT_NE(message_of([&] { f->at(4096); }).find("past"), std::string::npos);
}

}  // namespace
}  // namespace remat
