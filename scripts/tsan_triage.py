#!/usr/bin/env python3
"""Sorts ThreadSanitizer report files into ours (fail the run) and gRPC-internal (listed only).

    tsan_triage.py REPO_ROOT BUILD_DIR REPORT_FILE...

A report is gRPC-internal, and only then tolerated, when all of this holds:
  - it is a data race (every other kind - use after free, lock order, signal safety, thread leak,
    a race on a vptr - is always ours to look at);
  - no frame of any access stack is in our sources (REPO_ROOT, resolved from BUILD_DIR, which is
    where the report's relative paths start), and at least one access stack was restored;
  - the memory, when the report says where it was allocated, was not allocated by our code.
Why this exists: gRPC's callback API is partly headers compiled into our binaries (instrumented)
and partly libgrpc (Debian's, not instrumented). The lock-free handoffs of the library order the
header code's accesses, and TSan sees none of them: it reports races between two pieces of gRPC's
own inline code on gRPC's own memory (its call arena, its tags), with no frame of ours in either
access. TSan's suppression syntax cannot say "both stacks are theirs": `race:` matches a frame in
either stack (naming gRPC's tag runner there would hide every race in our reactor callbacks,
which that runner calls), `race_top:` only the innermost frame (std::function or operator delete
here, which our code uses too). A race with any frame of ours, or on our allocation, still fails.

Exit status: 0 when no report is ours, 1 otherwise (ours are printed whole to stderr).
"""
import os
import re
import sys

SEPARATOR = "=================="
ACCESS = re.compile(r"^  (Previous )?(atomic )?(read|write) of size", re.IGNORECASE)
SECTION = re.compile(r"^  \S")
FRAME_FILE = re.compile(r"\s(\S+?):\d+(?::\d+)?\s\([^()]*\)$")


def split_reports(text):
    """The WARNING blocks of one log file (TSan brackets each with a line of '=')."""
    reports, current = [], None
    for line in text.splitlines():
        if line.startswith("WARNING: ThreadSanitizer:"):
            current = [line]
            reports.append(current)
        elif line.startswith(SEPARATOR):
            current = None
        elif current is not None:
            current.append(line)
    return reports


def sections(report):
    """(header, frame lines) for each indented section of a report."""
    out = []
    for line in report[1:]:
        if SECTION.match(line):
            out.append((line, []))
        elif out and line.startswith("    "):
            out[-1][1].append(line)
    return out


class Triage:
    def __init__(self, repo_root, build_dir):
        self.repo_root = os.path.realpath(repo_root) + os.sep
        self.build_dir = os.path.realpath(build_dir)

    def is_ours(self, frame):
        m = FRAME_FILE.search(frame)
        if not m:  # "<null> (libgrpc++.so...)": a library without line tables
            return False
        path = os.path.normpath(os.path.join(self.build_dir, m.group(1)))
        return path.startswith(self.repo_root)

    def grpc_internal(self, report):
        if not report[0].startswith("WARNING: ThreadSanitizer: data race ("):
            return False
        restored = 0
        for header, frames in sections(report):
            if ACCESS.match(header):
                if any(self.is_ours(f) for f in frames):
                    return False
                restored += any(f.lstrip().startswith("#") for f in frames)
            elif header.startswith("  Location is"):
                if any(self.is_ours(f) for f in frames):
                    return False
        return restored > 0


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    triage = Triage(argv[1], argv[2])
    ours, theirs = [], []
    for name in argv[3:]:
        with open(name, errors="replace") as f:
            for report in split_reports(f.read()):
                (theirs if triage.grpc_internal(report) else ours).append((name, report))
    for name, report in theirs:
        summary = next((l for l in report if l.startswith("SUMMARY:")), report[0])
        print(f"tsan_triage: gRPC-internal, tolerated ({name}): {summary}")
    for name, report in ours:
        print(f"tsan_triage: REPORT ({name}):", file=sys.stderr)
        print("\n".join(report), file=sys.stderr)
    print(f"tsan_triage: {len(ours)} report(s) to fix, {len(theirs)} gRPC-internal")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
