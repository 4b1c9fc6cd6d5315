"""The benchmark app: async functions, so the runtime answers on its event loop without a thread hop and
the gateway, not the app, is what the benchmarks measure."""


async def echo(**kwargs):
    return kwargs


async def first(**kwargs):
    """Streams one event at once (time to first event), then a second one."""
    yield {"i": 0}
    yield {"i": 1}
