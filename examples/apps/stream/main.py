"""stream: a generator function; each yielded value is sent as one server-sent event."""

import json
import time


def run(count: int = 5, delay: float = 0.2):
    for i in range(1, int(count) + 1):
        yield json.dumps({"n": i, "of": int(count)})
        time.sleep(float(delay))
