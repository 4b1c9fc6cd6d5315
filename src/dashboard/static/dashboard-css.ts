/** Our few rules on top of Pico (appended to its stylesheet: one file is served). */
export const DASHBOARD_CSS = `
:root { --pico-font-size: 100%; }
.visually-hidden { position: absolute !important; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0; }
dl.grid-dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .25rem 1.5rem; }
dl.grid-dl dt { font-weight: 600; }
/* Long ids and URLs break rather than widen the page. */
dl.grid-dl dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
p code { overflow-wrap: anywhere; }
button.danger { background-color: #a3121b; border-color: #a3121b; color: #fff; }
.notice { border-left: .25rem solid var(--pico-primary); }
.skip-link { position: absolute; left: -9999px; }
.skip-link:focus { left: 1rem; top: 1rem; z-index: 10; background: var(--pico-background-color); padding: .5rem 1rem; }
header.site nav, header.site nav ul { flex-wrap: wrap; }
header.site nav a, header.site nav button { white-space: nowrap; }
header.site nav ul:first-child li { font-weight: 700; }
nav a[aria-current="page"] { text-decoration: underline; text-underline-offset: .3em; font-weight: 700; }
.table-wrap { overflow-x: auto; }
.table-wrap table { margin-bottom: 0; }
td, th { vertical-align: top; }
.state { display: inline-block; padding: .05rem .5rem; border-radius: 1rem; font-size: .875em; font-weight: 600;
  white-space: nowrap; border: 1px solid currentColor; }
.state-success, .state-True, .state-delivered { color: #0a6b2d; background: #e3f6e8; }
.state-failure, .state-timeout, .state-False, .state-failed { color: #a3121b; background: #fdecee; }
.state-running, .state-pending { color: #0b4f9c; background: #e6f0fc; }
.state-queued, .state-Unknown, .state-cancelled, .state-unknown { color: #3d4451; background: #eef0f3; }
@media (prefers-color-scheme: dark) {
  .state { background: transparent; }
  .state-success, .state-True, .state-delivered { color: #7be39a; }
  .state-failure, .state-timeout, .state-False, .state-failed { color: #ff9aa2; }
  .state-running, .state-pending { color: #9cc8ff; }
  .state-queued, .state-Unknown, .state-cancelled, .state-unknown { color: #c9ced6; }
}
.field-error { color: #a3121b; display: block; margin-top: -.5rem; margin-bottom: 1rem; }
@media (prefers-color-scheme: dark) { .field-error { color: #ff9aa2; } }
.token { word-break: break-all; white-space: pre-wrap; }
pre.result, pre.config, pre.logs { max-height: 24rem; overflow: auto; white-space: pre-wrap; word-break: break-word; }
.curl { white-space: pre-wrap; word-break: break-all; }
.empty { padding: 1.5rem; border: 1px dashed var(--pico-muted-border-color); border-radius: var(--pico-border-radius); }
.actions { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; }
.actions form { margin: 0; }
.actions button, .actions [role="button"] { margin: 0; padding: .35rem .75rem; font-size: .875em; width: auto; }
.actions .inline-form > * { flex: 0 1 auto; }
.actions select { width: auto; margin: 0; padding-top: .35rem; padding-bottom: .35rem; font-size: .875em; }
.inline-form { display: flex; gap: .5rem; flex-wrap: wrap; align-items: flex-start; }
.inline-form > * { flex: 1 1 12rem; margin-bottom: 0; }
.inline-form button { flex: 0 0 auto; width: auto; }
.muted { color: var(--pico-muted-color); }
.mark { display: inline-block; padding: 0 .4rem; border-radius: .25rem; font-weight: 600; color: #6b4a00; background: #fff4d6; }
.mark[data-mark="streamed"] { color: #0b4f9c; background: #e6f0fc; }
@media (prefers-color-scheme: dark) { .mark { background: transparent; color: #ffd27a; } .mark[data-mark="streamed"] { color: #9cc8ff; } }
ul.result-marks { padding-left: 0; }
ul.result-marks li { list-style: none; margin-bottom: .25rem; }
details.result-row { margin: .25rem 0 0; }
details.result-row summary { font-size: .875em; }
.attempts { list-style: none; padding: 0; margin: 0; font-size: .875em; }
.attempts li { list-style: none; }
.htmx-indicator { visibility: hidden; }
.htmx-request .htmx-indicator, .htmx-request.htmx-indicator { visibility: visible; }
@media (max-width: 576px) {
  .hide-narrow { display: none; }
  dl.grid-dl { grid-template-columns: minmax(0, 1fr); gap: 0; }
  dl.grid-dl dd { margin-bottom: .5rem; }
  header.site nav button { padding: .35rem .6rem; font-size: .875em; }
  /* Narrow screens: each row becomes a card, each cell labelled by its column. */
  table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0, 0, 0, 0); }
  table.stack, table.stack tbody, table.stack tr, table.stack th, table.stack td { display: block; width: 100%; }
  table.stack tr { border-bottom: 1px solid var(--pico-muted-border-color); padding: .5rem 0; }
  table.stack th, table.stack td { border: 0; padding: .2rem 0; }
  table.stack caption { display: block; text-align: left; padding: 0 0 .5rem; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
}
`;
