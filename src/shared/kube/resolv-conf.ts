/** Reads the pod's /etc/resolv.conf (undefined when there is none): only main.ts files call it. */
import { readFileSync } from 'node:fs';

export function readResolvConf(): string | undefined {
  try {
    return readFileSync('/etc/resolv.conf', 'utf8');
  } catch {
    return undefined;
  }
}
