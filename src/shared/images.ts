/**
 * The images apphost runs, as `make images` builds them (hack/images/names.ts; checked against the
 * chart, the manifests and these defaults by test/integration/chart/image-names.test.ts).
 */
/** The platform: operator, gateway, webhooks, management — and a deployed App's `fetch-code` init container. */
export const DEFAULT_PLATFORM_IMAGE = 'ghcr.io/apphost/apphost:0.1.0';
/** The cortex runtime App pods run, and the Python a dependency build runs pip with. */
export const DEFAULT_RUNTIME_IMAGE = 'ghcr.io/apphost/runtime-python:0.1.0';
