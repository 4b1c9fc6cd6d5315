import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { replicasFromSlices } from './endpoints.ts';

const slice = (over: Partial<V1EndpointSlice>): V1EndpointSlice => ({
  addressType: 'IPv4',
  endpoints: [],
  ports: [{ name: 'http', port: 8080 }],
  ...over,
});

describe('replicasFromSlices', () => {
  it('ready endpoints of every slice, deduplicated and sorted, on the named port', () => {
    const r = replicasFromSlices(
      [
        slice({
          endpoints: [
            { addresses: ['10.0.0.2'], conditions: { ready: true } },
            { addresses: ['10.0.0.9'], conditions: { ready: false, terminating: true, serving: true } },
          ],
        }),
        slice({
          endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'], conditions: { ready: true } }],
        }),
      ],
      'http',
    );
    expect(r).toEqual([
      { id: '10.0.0.1:8080', url: 'http://10.0.0.1:8080' },
      { id: '10.0.0.2:8080', url: 'http://10.0.0.2:8080' },
    ]);
  });

  it('IPv6 addresses get brackets; FQDN slices and slices without the port are ignored', () => {
    expect(
      replicasFromSlices(
        [
          slice({
            addressType: 'IPv6',
            endpoints: [{ addresses: ['fd00::5'], conditions: { ready: true } }],
          }),
          slice({ addressType: 'FQDN', endpoints: [{ addresses: ['a.example'] }] }),
          slice({
            ports: [
              { name: 'metrics', port: 9090 },
              { name: 'x', port: 1 },
            ],
            endpoints: [{ addresses: ['10.0.0.3'] }],
          }),
        ],
        'http',
      ),
    ).toEqual([{ id: '[fd00::5]:8080', url: 'http://[fd00::5]:8080' }]);
  });

  it('a single unnamed port is used', () => {
    expect(
      replicasFromSlices(
        [slice({ ports: [{ port: 9000 }], endpoints: [{ addresses: ['10.0.0.4'] }] })],
        'http',
      ),
    ).toEqual([{ id: '10.0.0.4:9000', url: 'http://10.0.0.4:9000' }]);
  });
});
