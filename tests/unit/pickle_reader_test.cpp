// The restricted pickle reader: every data opcode it accepts, every code opcode it refuses (by
// name and offset), truncation at every byte, and its limits.
#include <gtest/gtest.h>

#include <string>

#include "core/io/pickle_reader.h"
#include "core/util/error.h"
#include "core/util/limits.h"
#include "test_files.h"

namespace remat {
namespace {

using pickle::Kind;
using remat::testing::message_of;

std::string b(std::initializer_list<int> bytes) {
  std::string s;
  for (int c : bytes) s += static_cast<char>(c);
  return s;
}
std::string le32(std::uint32_t v) { return b({int(v & 255), int((v >> 8) & 255), int((v >> 16) & 255), int(v >> 24)}); }
std::string le64(std::uint64_t v) { return le32(static_cast<std::uint32_t>(v)) + le32(static_cast<std::uint32_t>(v >> 32)); }
// PROTO 4, body, STOP.
std::string p4(const std::string& body) { return b({0x80, 4}) + body + "."; }

pickle::Document parse(const std::string& s) { return pickle::parse(s, "test.pickle"); }

TEST(PickleReader, Scalars) {
  EXPECT_EQ(parse(p4("N")).root().kind, Kind::None);
  EXPECT_TRUE(parse(p4(b({0x88}))).root().b);
  EXPECT_FALSE(parse(p4(b({0x89}))).root().b);
  EXPECT_EQ(parse(p4("J" + le32(0xfffffffe))).root().i, -2);       // BININT
  EXPECT_EQ(parse(p4(b({'K', 200}))).root().i, 200);                // BININT1
  EXPECT_EQ(parse(p4(b({'M', 0x34, 0x12}))).root().i, 0x1234);      // BININT2
  EXPECT_EQ(parse(p4(b({0x8a, 0}))).root().i, 0);                   // LONG1 of zero bytes
  EXPECT_EQ(parse(p4(b({0x8a, 2, 0x00, 0x80}))).root().i, -32768);  // LONG1, sign-extended
  EXPECT_EQ(parse(p4(b({0x8a, 6, 0, 0, 0, 0, 0xf0, 0x7f}))).root().i, 0x7ff000000000LL);
  EXPECT_EQ(parse(p4(b({0x8b}) + le32(8) + le64(0x123456789abcdefULL))).root().i, 0x123456789abcdefLL);  // LONG4
  EXPECT_EQ(parse("I42\n.").root().i, 42);      // INT (protocol 0)
  EXPECT_TRUE(parse("I01\n.").root().b);        // INT as a protocol-0 bool
  EXPECT_EQ(parse("L-7L\n.").root().i, -7);     // LONG (protocol 0)
  EXPECT_DOUBLE_EQ(parse("F2.5\n.").root().f, 2.5);  // FLOAT
  EXPECT_DOUBLE_EQ(parse(p4(b({'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}))).root().f, 1.5);  // BINFLOAT, big-endian
}

TEST(PickleReader, Strings) {
  auto str = [](const std::string& s) {
    auto d = parse(s);
    return std::string(d.str(d.root()));
  };
  EXPECT_EQ(str(p4(b({0x8c, 3}) + "abc")), "abc");                  // SHORT_BINUNICODE
  EXPECT_EQ(str(p4("X" + le32(2) + "hi")), "hi");                   // BINUNICODE
  EXPECT_EQ(str(p4(b({0x8d}) + le64(1) + "z")), "z");               // BINUNICODE8
  EXPECT_EQ(str(p4("T" + le32(1) + "q")), "q");                     // BINSTRING
  EXPECT_EQ(str(p4(b({'U', 2}) + "ok")), "ok");                     // SHORT_BINSTRING
  EXPECT_EQ(str("S'a\\nb'\n."), "a\nb");                            // STRING
  EXPECT_EQ(str("Vcaf\\u00e9\n."), "caf\xc3\xa9");                  // UNICODE
  auto d = parse(p4(b({'C', 2, 1, 2})));                            // SHORT_BINBYTES
  EXPECT_EQ(d.root().kind, Kind::Bytes);
  EXPECT_EQ(d.str(d.root()).size(), 2u);
  EXPECT_EQ(parse(p4("B" + le32(0))).root().kind, Kind::Bytes);     // BINBYTES
  EXPECT_EQ(parse(p4(b({0x8e}) + le64(0))).root().kind, Kind::Bytes);  // BINBYTES8
  EXPECT_EQ(parse(p4(b({0x96}) + le64(0))).root().kind, Kind::Bytes);  // BYTEARRAY8
}

TEST(PickleReader, Containers) {
  // {"a": [1, 2, (3,), (), (4, 5), (6, 7, 8)], "b": None} with MARK, APPEND(S), SETITEM(S).
  std::string body = b({'}', 0x94, '(', 0x8c, 1, 'a', ']', 0x94, 'K', 1, 'a', '(', 'K', 2, 'K', 3, 0x85, ')', 'K', 4,
                        'K', 5, 0x86, 'K', 6, 'K', 7, 'K', 8, 0x87, 'e', 0x8c, 1, 'b', 'N', 'u'});
  auto d = parse(p4(body));
  ASSERT_EQ(d.root().kind, Kind::Dict);
  const auto& a = d.items(*d.get(d.root(), "a"));
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0].i, 1);
  EXPECT_EQ(d.items(a[2]).size(), 1u);
  EXPECT_EQ(a[3].kind, Kind::Tuple);
  EXPECT_EQ(d.items(a[3]).size(), 0u);
  EXPECT_EQ(d.items(a[5])[2].i, 8);
  EXPECT_EQ(d.get(d.root(), "b")->kind, Kind::None);
  EXPECT_EQ(d.get(d.root(), "c"), nullptr);
  // LIST, TUPLE and DICT from a MARK; SETITEM; POP, DUP, POP_MARK.
  auto l = parse(p4(b({'(', 'K', 1, 'K', 2, 'l'})));
  EXPECT_EQ(l.items(l.root()).size(), 2u);
  auto t = parse(p4(b({'(', 'K', 1, 't'})));
  EXPECT_EQ(t.root().kind, Kind::Tuple);
  auto dd = parse(p4(b({'(', 0x8c, 1, 'k', 'K', 9, 'd', 0x8c, 1, 'j', 'K', 3, 's'})));
  EXPECT_EQ(dd.get(dd.root(), "k")->i, 9);
  EXPECT_EQ(dd.get(dd.root(), "j")->i, 3);
  EXPECT_EQ(parse(p4(b({'K', 1, 'K', 2, '0'}))).root().i, 1);                      // POP
  {
    auto dup = parse(p4(b({'K', 5, '2', 0x86})));  // DUP
    EXPECT_EQ(dup.items(dup.root()).size(), 2u);
  }
  EXPECT_EQ(parse(p4(b({'K', 1, '(', 'K', 2, 'K', 3, '1'}))).root().i, 1);         // POP_MARK
  // FRAME is skipped over.
  EXPECT_EQ(parse(b({0x80, 4, 0x95}) + le64(3) + b({'K', 7, '.'})).root().i, 7);
}

TEST(PickleReader, MemoSharesOneObject) {
  // [x, x] with x = {"n": 1} memoized by MEMOIZE, BINPUT, LONG_BINPUT, PUT and read back by
  // BINGET, LONG_BINGET and GET.
  for (const auto& [put, get] : std::vector<std::pair<std::string, std::string>>{
           {b({0x94}), b({'h', 1})}, {b({'q', 1}), b({'h', 1})}, {"r" + le32(1), "j" + le32(1)},
           {"p1\n", "g1\n"}}) {
    std::string body = b({']', 0x94, '(', '}'}) + put + b({0x8c, 1, 'n', 'K', 1, 's'}) + get + "e";
    auto d = parse(p4(body));
    const auto& l = d.items(d.root());
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0].kind, Kind::Dict);
    EXPECT_EQ(l[0].index, l[1].index) << "a memo GET is the same object";
    EXPECT_EQ(d.get(l[1], "n")->i, 1);
  }
}

struct Refused {
  const char* name;
  std::string bytes;
};

TEST(PickleReader, RefusesEveryOpcodeThatImportsOrCalls) {
  const Refused code[] = {
      {"GLOBAL", "cposix\nsystem\n"}, {"STACK_GLOBAL", b({0x93})}, {"REDUCE", "R"},   {"BUILD", "b"},
      {"INST", "iposix\nsystem\n"},   {"OBJ", "o"},                {"NEWOBJ", b({0x81})},
      {"NEWOBJ_EX", b({0x92})},       {"EXT1", b({0x82, 1})},       {"EXT2", b({0x83, 1, 0})},
      {"EXT4", b({0x84, 1, 0, 0, 0})}, {"PERSID", "P0\n"},         {"BINPERSID", "Q"},
      {"NEXT_BUFFER", b({0x97})},     {"READONLY_BUFFER", b({0x98})}};
  for (const auto& r : code) {
    // After PROTO and an int, so the offset is 4.
    std::string m = message_of([&] { parse(b({0x80, 4, 'K', 1}) + r.bytes + "."); });
    EXPECT_NE(m.find(std::string("opcode ") + r.name + " ("), std::string::npos) << m;
    EXPECT_NE(m.find("would import or call code"), std::string::npos) << m;
    EXPECT_NE(m.find("offset 4"), std::string::npos) << m;
    EXPECT_EQ(m.rfind("test.pickle", 0), 0u) << m;
  }
  EXPECT_NE(message_of([] { parse(p4(b({0x8f}))); }).find("EMPTY_SET"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({0xff}))); }).find("unknown opcode 0xff"), std::string::npos);
  EXPECT_NE(message_of([] { parse(b({0x80, 6, 'N', '.'})); }).find("protocol 6"), std::string::npos);
}

TEST(PickleReader, RefusesTheHostileFixtureWithoutRunningIt) {
  const std::string marker = "/tmp/rematlab-pickle-must-not-run";  // make_fixtures.py MARKER
  std::filesystem::remove(marker);
  for (const char* f : {"runs-code-global.pickle", "runs-code-stack-global.pickle"}) {
    const std::string path = std::string(REMAT_TEST_DATA_DIR) + "/torch/" + f;
    std::string m = message_of([&] { pickle::read_file(path); });
    EXPECT_NE(m.find(std::string(f).find("stack") != std::string::npos ? "opcode STACK_GLOBAL" : "opcode GLOBAL"),
              std::string::npos) << m;
    EXPECT_NE(m.find("would import or call code"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(PickleReader, MalformedStacks) {
  EXPECT_NE(message_of([] { parse(p4("")); }).find("STOP with 0 values"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4("NN")); }).find("STOP with 2 values"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4("e")); }).find("APPENDS without a MARK"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4("Na")); }).find("APPEND"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4("NNa")); }).find("not a list"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({'h', 3}))); }).find("never PUT"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({'}', '(', 'N', 'u'}))); }).find("odd number"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({'}', ']', 'K', 1, 's'}))); }).find("as a dict key"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4("N") + "junk"); }).find("4 bytes after STOP"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1}))); }).find("beyond 64 bits"),
            std::string::npos);
  // A list put inside itself, or changed once inside another, would be a cycle.
  EXPECT_NE(message_of([] { parse(p4(b({']', 0x94, 'h', 0, 'a'}))); }).find("inside itself"), std::string::npos);
  EXPECT_NE(message_of([] { parse(p4(b({']', 0x94, ']', 'h', 0, 'a', 'h', 0, 'K', 1, 'a', '0'}))); })
                .find("already placed in another"),
            std::string::npos);
}

TEST(PickleReader, EveryTruncationIsAnErrorWithItsOffset) {
  const std::string whole = remat::testing::slurp(std::string(REMAT_TEST_DATA_DIR) + "/torch/snapshot-small.pickle");
  ASSERT_GT(whole.size(), 1000u);
  ASSERT_NO_THROW(parse(whole));
  for (std::size_t n = 0; n < whole.size(); ++n) {
    std::string m = message_of([&] { parse(whole.substr(0, n)); });
    ASSERT_NE(m.find("test.pickle: pickle offset "), std::string::npos) << n << ": " << m;
  }
  // The same holds for the bigger fixtures, the torch 1.13 one at protocol 2 (BINPUT,
  // BINUNICODE), at every 61st byte.
  for (const char* f : {"snapshot-torch2.pickle", "snapshot-torch113.pickle"}) {
    const std::string old = remat::testing::slurp(std::string(REMAT_TEST_DATA_DIR) + "/torch/" + f);
    for (std::size_t n = 0; n < old.size(); n += 61)
      ASSERT_NE(message_of([&] { parse(old.substr(0, n)); }).find("pickle offset"), std::string::npos) << f << n;
  }
}

TEST(PickleReader, TheMemoHoldsNoMoreEntriesThanThePickleBuiltValues) {
  // A pickler numbers entries in order, one per value: a PUT numbered past the values built so
  // far, or a second MEMOIZE of one value, is refused (entries once cost up to 62 bytes each,
  // 2^28 of them, from 1 to 5 bytes of pickle each).
  std::string m = message_of([] { parse(p4(b({']', 'N'}) + "r" + le32(70000) + b({'0', 'a'}))); });
  EXPECT_NE(m.find("memo PUT of entry 70000 when only 2 values were built"), std::string::npos) << m;
  m = message_of([] { parse(p4(b({'N', 0x94, 0x94}))); });
  EXPECT_NE(m.find("memo PUT of entry 1 when only 1 values were built"), std::string::npos) << m;
  // An optimized pickle may skip numbers; a GET of one that was skipped is refused.
  auto d = parse(p4(b({']', '(', 'N', 'N', 'N', 'q', 2, 'h', 2, 'e'})));
  EXPECT_EQ(d.items(d.root()).size(), 4u);
  m = message_of([] { parse(p4(b({']', '(', 'N', 'N', 'N', 'q', 2, 'h', 1, 'e'}))); });
  EXPECT_NE(m.find("memo GET of entry 1, which was never PUT"), std::string::npos) << m;
}

// Lists L0 = [None, None], L(i) = [L(i-1), L(i-1)] through the memo: a walk of L(k) visits
// 2^(k+2) - 1 values from about 10 bytes a level.
std::string doubling(int levels) {
  std::string body = b({']', '(', 'N', 'N', 'e', 0x94, '0'});
  for (int i = 1; i <= levels; ++i) body += b({']', '(', 'h', i - 1, 'h', i - 1, 'e', 0x94, '0'});
  return p4(body + b({'h', levels}));
}

TEST(PickleReader, SharingThatExpandsPastTheFilesSizeIsRefusedByName) {
  auto d = parse(doubling(8));  // 1,023 values from 85 bytes: within the floor
  EXPECT_EQ(d.items(d.root()).size(), 2u);
  std::string m;
  try {
    parse(doubling(40));  // 2^42 values from 370 bytes (a 12 KB pickle once expanded past 3 GB)
  } catch (const LimitError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("shared through the memo expand to more than"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(limits::kPickleExpansionPerByte) + " per byte"), std::string::npos) << m;
}

TEST(PickleReader, Limits) {
  // Nesting: lists inside lists, one level too many.
  std::string deep;
  for (int k = 0; k <= limits::kPickleDepth; ++k) deep += "]";
  for (int k = 0; k < limits::kPickleDepth; ++k) deep += "a";
  std::string m;
  try {
    parse(p4(deep));
  } catch (const LimitError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("nested deeper than"), std::string::npos) << m;
  std::string shallow;
  for (int k = 0; k < 10; ++k) shallow += "]";
  for (int k = 0; k < 9; ++k) shallow += "a";
  EXPECT_NO_THROW(parse(p4(shallow)));
  // MARKs open at once.
  EXPECT_THROW(parse(p4(std::string(static_cast<std::size_t>(limits::kPickleDepth) + 1, '('))), LimitError);
  // A string longer than the limit is refused before it is read.
  EXPECT_THROW(parse(p4(b({0x8d}) + le64(limits::kPickleStringBytes + 1))), LimitError);
  // A declared length past the end is truncation, not an allocation.
  EXPECT_NE(message_of([] { parse(p4("X" + le32(1000) + "ab")); }).find("truncated: BINUNICODE needs 1000 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
