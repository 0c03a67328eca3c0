#include "engine/util/mapped_file.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/test_util.h"

namespace textgen {
namespace mapped_file_test {

using ::textgen::testing::ScratchDir;
using ::textgen::testing::WriteFile;

TEST_CASE("MappedFile maps a whole file read-only", "[mapped_file]") {
  const std::string path = ScratchDir() + "/data.bin";
  std::string bytes = "hello";
  bytes.push_back('\0');
  bytes += "world";
  WriteFile(path, bytes);
  auto file = MappedFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->size() == bytes.size());
  CHECK((*file)->path() == path);
  CHECK((*file)->view() == bytes);
}

TEST_CASE("MappedFile maps an empty file to nothing", "[mapped_file]") {
  const std::string path = ScratchDir() + "/empty.bin";
  WriteFile(path, "");
  auto file = MappedFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->size() == 0);
  CHECK((*file)->data() == nullptr);
  CHECK((*file)->view().empty());
}

TEST_CASE("MappedFile reports missing files and directories", "[mapped_file]") {
  const std::string dir = ScratchDir();
  auto missing = MappedFile::Open(dir + "/nope.bin");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains(dir + "/nope.bin"));

  auto directory = MappedFile::Open(dir);
  REQUIRE(!directory.ok());
  CHECK(directory.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(directory.status().message()), Catch::Contains(dir));
}

}  // namespace mapped_file_test
}  // namespace textgen
