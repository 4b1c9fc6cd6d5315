/**
 * What a gateway pod receives while no one calls it, as the chart sets it up: kubelet's readiness probe
 * (GET /readyz every 5 s) and liveness probe (GET /healthz every 10 s) on the ops port
 * (charts/apphost/templates/_helpers.tpl; the startup probe stops once the pod has started), and a
 * Prometheus scrape of /metrics (the pod's prometheus.io/scrape annotations; the interval is Prometheus's
 * own setting: 15 s here, a common scrape_interval). `settleIdle` sends that to some gateways for a named
 * period and samples their memory every readiness period, so `make bench` can give the idle of a pod that
 * has been up a while beside the figure at `listening` (docs/benchmarks.md, "The pod's idle").
 */

export const IDLE_READYZ_MS = 5_000;
export const IDLE_HEALTHZ_MS = 10_000;
export const IDLE_SCRAPE_MS = 15_000;

export interface IdleTarget {
  opsUrl: string;
  /** The figure sampled (e.g. the pod's RSS, in bytes). */
  read: () => number;
}

export interface IdleReading {
  /** The figure at the end of the period. */
  end: number;
  /** Lowest and highest sample over the period's second half (V8's collections make it a sawtooth). */
  min: number;
  max: number;
}

const get = async (url: string): Promise<void> => {
  try {
    await (await fetch(url)).arrayBuffer();
  } catch {
    // a probe that fails is a probe kubelet sent all the same
  }
};

/** Sends the idle traffic to every target for `seconds`, then returns each one's figures. */
export async function settleIdle(targets: IdleTarget[], seconds: number): Promise<IdleReading[]> {
  const samples: number[][] = targets.map(() => []);
  const t0 = Date.now();
  const end = t0 + seconds * 1000;
  // Probes and scrapes start with the period, as a new pod's do once it is ready.
  let nextReady = t0;
  let nextHealth = t0;
  let nextScrape = t0;
  while (Date.now() < end) {
    const now = Date.now();
    const sends: Promise<void>[] = [];
    for (const t of targets) {
      if (now >= nextReady) sends.push(get(`${t.opsUrl}/readyz`));
      if (now >= nextHealth) sends.push(get(`${t.opsUrl}/healthz`));
      if (now >= nextScrape) sends.push(get(`${t.opsUrl}/metrics`));
    }
    if (now >= nextReady) nextReady += IDLE_READYZ_MS;
    if (now >= nextHealth) nextHealth += IDLE_HEALTHZ_MS;
    if (now >= nextScrape) nextScrape += IDLE_SCRAPE_MS;
    await Promise.all(sends);
    if (now - t0 >= (seconds * 1000) / 2) {
      for (const [i, t] of targets.entries()) samples[i]?.push(t.read());
    }
    const next = Math.min(nextReady, nextHealth, nextScrape, end);
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
  }
  return targets.map((t, i) => {
    const last = t.read();
    const s = [...(samples[i] ?? []), last];
    return { end: last, min: Math.min(...s), max: Math.max(...s) };
  });
}
