// The web chat page served at "/": server/openai/chat_page.html, compiled in by CMake
// (embed_file.cmake), so the binary serves it with nothing to install or fetch.
#ifndef TEXTGEN_SERVER_OPENAI_CHAT_PAGE_H_
#define TEXTGEN_SERVER_OPENAI_CHAT_PAGE_H_

namespace textgen::server::openai {

extern const char kChatPageHtml[];

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_CHAT_PAGE_H_
