# gdb script (`gdb -p PID -batch -x bench/moves.py`): records every memmove/memcpy of at least
# MOVES_MIN bytes (default 200) the process makes, one line per copy in MOVES_OUT: its size and
# the two functions above the copy. bench/run.sh mcp-moves drives it; the copies a future's
# move makes are these (rustc moves a value with memcpy once it is this large).
import os

import gdb

MIN = int(os.environ.get("MOVES_MIN", "200"))
OUT = open(os.environ["MOVES_OUT"], "a", buffering=1)


class Copy(gdb.Breakpoint):
    def stop(self):
        size = int(gdb.parse_and_eval("$rdx"))
        if size >= MIN:
            frame, names = gdb.newest_frame().older(), []
            while frame is not None and len(names) < 2:
                names.append(frame.name() or "?")
                frame = frame.older()
            OUT.write(f"{size}\t{' < '.join(names)}\n")
        return False  # never stop: count and go on


gdb.execute("set pagination off")
# glibc picks one variant per CPU (an IFUNC); the copies go to whichever it picked.
for variant in ("avx512", "evex", "avx", "sse2"):
    for kind in ("memmove", "memcpy"):
        try:
            Copy(f"__{kind}_{variant}_unaligned_erms", internal=True)
        except gdb.error:
            pass
OUT.write("#armed\n")
gdb.execute("continue")
