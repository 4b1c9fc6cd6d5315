/**
 * The platform's name rules, stated once: every piece that accepts a project id, an App or domain name,
 * or a custom hostname checks it here, and the CRDs state the same patterns (names.test.ts holds them
 * together). A dot in a project id or app name would alias NATS subjects and run-record keys.
 */
import { z } from 'zod';

/** RFC 1123 label: a namespace's project label value, an App, DomainAssignment or service-account name. */
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
export const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);

/**
 * A custom domain's hostname: a lowercase DNS name of at least two labels, no wildcard, scheme, port or
 * path (the DomainAssignment CRD's CEL rule on spec.hostname).
 */
export const HOSTNAME_PATTERN =
  '^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\\.)+[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
export const HOSTNAME = new RegExp(HOSTNAME_PATTERN);
export const HOSTNAME_MAX_LENGTH = 253;

export const dnsLabel = (message = 'must be a DNS label (lowercase letters, digits, -)') =>
  z.string().max(63).regex(DNS_LABEL, message);

export const hostname = (message = 'must be a fully qualified hostname, e.g. app.example.com') =>
  z.string().max(HOSTNAME_MAX_LENGTH).regex(HOSTNAME, message);
