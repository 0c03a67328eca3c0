// Shared helpers for tests: where the models and references live, scratch files.
#ifndef TEXTGEN_TESTS_TEST_UTIL_H_
#define TEXTGEN_TESTS_TEST_UTIL_H_

#include <string>

namespace textgen::testing {

// The source tree this test binary was built from (deployment files, docs).
std::string SourceDir();
// $TEXTGEN_MODELS, else <source>/../shared/models. Fails the test if the folder is missing.
std::string ModelsDir();
// $TEXTGEN_REFERENCE, else <ModelsDir()>/../reference.
std::string ReferenceDir();
// $TEXTGEN_CHAT_TEMPLATES, else <ModelsDir()>/../chat-templates (real models' templates and
// what Python jinja2 renders for them).
std::string ChatTemplatesDir();
// ModelsDir() + "/" + name.
std::string ModelPath(const std::string& name);
// A fresh, empty directory under $TMPDIR, unique per call; removed at process exit.
std::string ScratchDir();
// Writes `bytes` to `path` (binary), replacing it.
void WriteFile(const std::string& path, const std::string& bytes);
// Reads a whole file; fails the test if it cannot.
std::string ReadFile(const std::string& path);

// `s` single-quoted for /bin/sh.
std::string ShellQuote(const std::string& s);

struct CommandResult {
  int exit_code = -1;  // -1 if the command did not exit normally
  std::string out;     // its standard output
};
// Runs `command` with /bin/sh and collects its standard output.
CommandResult RunCommand(const std::string& command);

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TEST_UTIL_H_
