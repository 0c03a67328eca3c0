#!/usr/bin/env bash
# Prints the Debian packages that provide the shared libraries the given binaries link, one per
# line: the image's runtime stage installs exactly these.
set -euo pipefail
for lib in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  # usr-merge: dpkg may have registered the /lib or the /usr/lib spelling of the path.
  for path in "$lib" "$(realpath "$lib")" "/usr${lib}" "${lib#/usr}"; do
    if pkg=$(dpkg-query -S "$path" 2>/dev/null); then
      echo "${pkg%%:*}"
      continue 2
    fi
  done
  echo "runtime-packages.sh: no package owns $lib" >&2
  exit 1
done | sort -u
