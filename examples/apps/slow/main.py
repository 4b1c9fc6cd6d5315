"""slow: sleeps, then returns; made for async runs with webhook forwarding."""

import time


def run(seconds: float = 3, label: str = "done") -> dict:
    seconds = min(max(float(seconds), 0.0), 60.0)
    time.sleep(seconds)
    return {"label": label, "slept_seconds": seconds}
