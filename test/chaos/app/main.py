"""The chaos test's app: each execution appends one line (tag, start time, runtime) to the log file
named by CHAOS_EXEC_LOG, then works for `ms` milliseconds and returns its tag."""

import os
import time


def work(tag: str, ms: int = 100) -> dict:
    with open(os.environ["CHAOS_EXEC_LOG"], "a") as f:
        f.write(f"{tag} {time.time():.3f} {os.environ.get('CHAOS_RUNTIME', '?')}\n")
    time.sleep(ms / 1000)
    return {"tag": tag}
