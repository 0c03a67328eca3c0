# cmake -DIN=file -DOUT=file.cc -DNAME=kSymbol -DNAMESPACE=a::b -P embed_file.cmake
# Writes a C++ file defining `const char NAME[]` with IN's bytes (hex, so any content is safe).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by embed_file.cmake; do not edit.\n"
  "namespace ${NAMESPACE} {\nextern const char ${NAME}[];\nconst char ${NAME}[] = {${bytes}'\\0'};\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
