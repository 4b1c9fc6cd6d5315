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

/**
 * RFC 1035 label: an app name, which is also its Service's name, and a Service name must start with a
 * letter (at most 63 characters, checked where it is used).
 */
export const APP_NAME = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** RFC 1123 subdomain: the name of most Kubernetes objects (a Secret, a namespace's objects). */
export const DNS_SUBDOMAIN_MAX_LENGTH = 253;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const isDnsSubdomain = (name: string): boolean =>
  name.length <= DNS_SUBDOMAIN_MAX_LENGTH && DNS_SUBDOMAIN.test(name);

/** A Kubernetes label value (what may go into a label selector), e.g. a namespace's project label. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
export const isLabelValue = (value: string): boolean => value.length <= 63 && LABEL_VALUE.test(value);

export const dnsLabel = (message = 'must be a DNS label (lowercase letters, digits, -)') =>
  z.string().max(63).regex(DNS_LABEL, message);

export const hostname = (message = 'must be a fully qualified hostname, e.g. app.example.com') =>
  z.string().max(HOSTNAME_MAX_LENGTH).regex(HOSTNAME, message);
