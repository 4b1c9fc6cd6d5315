import { describe, expect, it } from 'vitest';
import type { App } from '../../../apis/v1alpha1/types.ts';
import { appUrl } from './labels.ts';

const app = { metadata: { name: 'hello', namespace: 'shop' } } as App;

describe('appUrl', () => {
  it('is the Service URL in the cluster’s DNS domain (cluster.local unless set)', () => {
    expect(appUrl(app)).toBe('http://hello.shop.svc.cluster.local');
    expect(appUrl(app, 'k8s.example.com')).toBe('http://hello.shop.svc.k8s.example.com');
  });
});
