#!/usr/bin/env python3
"""Sorts ThreadSanitizer report files into ours (fail the run) and gRPC-internal (listed only).

    tsan_triage.py REPO_ROOT BUILD_DIR REPORT_FILE...

A report is gRPC-internal, and only then tolerated, when all of this holds:
  - it is a data race (every other kind - use after free, lock order, signal safety, thread leak,
    a race on a vptr - is always ours to look at);
  - at least one access stack was restored and has no frame in our sources (REPO_ROOT, resolved
    from BUILD_DIR, where the report's relative paths start): a library thread on one side;
  - in every access stack the accessing frame (the innermost one outside TSan's runtime) is not
    ours: our code may be further out, as the caller of a gRPC API (e.g. ClientReader::Finish
    copying the status message a gRPC thread wrote), never the one touching the memory;
  - the memory is not ours: when the report says where it was allocated, the allocating code is
    not ours (the innermost frame past TSan's runtime, the C++ standard library's headers and
    Abseil, which allocate for whoever calls them): our code may again be further out, as the
    caller of a gRPC API that allocates (e.g. ServerWriteReactor::Finish copying the status
    message that gRPC's core reads on its own thread); and when our frames are in an access, it
    must be a heap block the report traces to library code (stack or global memory is then never
    tolerated).
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


def in_tsan_runtime(frame):
    """Frames of TSan itself (interceptors such as memcpy, operator new/delete)."""
    return "/libsanitizer/" in frame or "(libtsan.so" in frame


def generic_allocator(frame):
    """Frames that allocate on behalf of their caller: std:: headers, libstdc++, Abseil."""
    return ("/usr/include/c++/" in frame or "(libstdc++.so" in frame
            or "(libabsl_" in frame)


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

    def allocated_by_us(self, frames):
        """Whether the allocation stack's deciding frame is ours: the innermost one that is not
        TSan's runtime or a generic allocator; with none such, any frame of ours decides."""
        deciding = next((f for f in frames
                         if not in_tsan_runtime(f) and not generic_allocator(f)), None)
        if deciding is None:
            return any(self.is_ours(f) for f in frames)
        return self.is_ours(deciding)

    def grpc_internal(self, report):
        if not report[0].startswith("WARNING: ThreadSanitizer: data race ("):
            return False
        library_only = our_callers = False
        heap_location = False
        for header, frames in sections(report):
            restored = [f for f in frames if f.lstrip().startswith("#")]
            if ACCESS.match(header):
                accessor = next((f for f in restored if not in_tsan_runtime(f)), None)
                if accessor is not None and self.is_ours(accessor):
                    return False
                if any(self.is_ours(f) for f in restored):
                    our_callers = True
                elif restored:
                    library_only = True
            elif header.startswith("  Location is"):
                if self.allocated_by_us(frames):
                    return False
                heap_location = header.startswith("  Location is heap block") and bool(restored)
        return library_only and (heap_location or not our_callers)


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
