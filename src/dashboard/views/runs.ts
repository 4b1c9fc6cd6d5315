/** The run table: a fragment on its own too, so htmx can refresh it while runs are unfinished. */
export const RUNS_TABLE = `<div id="runs-table" class="table-wrap"<% if (it.live) { %> hx-get="<%= it.refreshUrl %>" hx-trigger="every <%= it.refreshSeconds %>s" hx-swap="outerHTML"<% } %>>
<% if (it.runs.length === 0) { %>
<div class="empty" role="status">
  <p><strong><%= it.emptyTitle %></strong></p>
  <p><%= it.emptyHint %></p>
<% if (it.curl) { %>
  <pre class="curl"><code><%= it.curl %></code></pre>
<% } %>
</div>
<% } else { %>
<table class="stack">
  <caption class="muted"><%= it.caption %></caption>
  <thead><tr>
    <th scope="col">Run</th><th scope="col">App</th><th scope="col">Mode</th><th scope="col">State</th>
    <th scope="col">Timing</th><th scope="col">Webhook</th><th scope="col">Result</th><th scope="col"><span class="visually-hidden">Actions</span></th>
  </tr></thead>
  <tbody>
<% for (const r of it.runs) { %>
    <tr data-run="<%= r.runId %>" data-state="<%= r.state %>">
      <th scope="row"><a href="<%= r.href %>"><code><%= r.shortId %></code></a><br><small class="muted"><%= r.path %></small></th>
      <td data-label="App"><%= r.appName %></td>
      <td data-label="Mode"><span class="mode"><%= r.mode %></span></td>
      <td data-label="State"><span class="state state-<%= r.state %>"><%= r.state %></span><% if (r.cancelRequested && !r.terminal) { %><br><small>cancelling…</small><% } %></td>
      <td data-label="Queued"><small><time datetime="<%= r.createdAt %>"><%= r.created %></time><br><%= r.timing %></small></td>
      <td data-label="Webhook">
<% if (r.webhook) { %>
        <small><%= r.webhook.host %><% if (r.webhook.state) { %> · <span class="state state-<%= r.webhook.state %>"><%= r.webhook.state %></span><% } %></small>
<% if (r.webhook.attempts.length > 0) { %>
        <ul class="attempts">
<% for (const a of r.webhook.attempts) { %>
          <li>#<%= a.attempt %> <%= a.status %> · <time datetime="<%= a.at %>"><%= a.time %></time></li>
<% } %>
        </ul>
<% } %>
<% } else { %><span class="muted">none</span><% } %>
      </td>
      <td data-label="Result">
<% if (r.result) { %>
        <small class="result-summary"><%= r.result.summary %></small>
<% for (const m of r.result.marks) { %>
        <br><small class="mark" data-mark="<%= m.kind %>"><%= m.kind %></small>
<% } %>
<% if (r.resultUrl) { %>
        <details class="result-row" id="result-<%= r.runId %>" hx-preserve hx-get="<%= r.resultUrl %>" hx-trigger="toggle once" hx-target="find .result-body" hx-swap="innerHTML">
          <summary>Show<span class="visually-hidden"> the result of run <%= r.runId %></span></summary>
          <div class="result-body"><a href="<%= r.href %>">Open the run to see its result</a></div>
        </details>
<% } %>
<% } else if (r.error) { %>
        <small><%= r.error %></small>
<% } else if (r.resultNote) { %>
        <small class="muted"><%= r.resultNote %></small>
<% } %>
      </td>
      <td><div class="actions">
<% if (r.cancellable) { %>
        <form method="post" action="<%= r.cancelUrl %>">
          <input type="hidden" name="_csrf" value="<%= it.csrf %>">
          <input type="hidden" name="back" value="<%= it.back %>">
          <button type="submit" class="secondary">Cancel<span class="visually-hidden"> run <%= r.runId %></span></button>
        </form>
<% } %>
      </div></td>
    </tr>
<% } %>
  </tbody>
</table>
<% } %>
</div>
`;

export const RUNS = `<hgroup>
  <h1>Runs</h1>
  <p>Runs of project <strong><%= it.projectId %></strong>, newest first: every <em>async</em> run
  (<code>?async=true</code>), and recent <em>sync</em> calls: the newest <%= it.syncKept %> per app, a sample
  when an app gets many calls a second (a sync call keeps no result).</p>
</hgroup>
<form method="get" action="/dashboard/runs" class="inline-form" aria-label="Filter runs">
  <div>
    <label for="f-app">App</label>
    <select id="f-app" name="app">
      <option value="">All apps</option>
<% for (const a of it.apps) { %>
      <option value="<%= a %>"<% if (a === it.filter.app) { %> selected<% } %>><%= a %></option>
<% } %>
    </select>
  </div>
  <div>
    <label for="f-state">State</label>
    <select id="f-state" name="state">
      <option value="">Any state</option>
<% for (const s of it.states) { %>
      <option value="<%= s %>"<% if (s === it.filter.state) { %> selected<% } %>><%= s %></option>
<% } %>
    </select>
  </div>
  <div>
    <label for="f-mode">Mode</label>
    <select id="f-mode" name="mode">
      <option value="">Any mode</option>
<% for (const m of it.modes) { %>
      <option value="<%= m %>"<% if (m === it.filter.mode) { %> selected<% } %>><%= m %></option>
<% } %>
    </select>
  </div>
  <div><label>&nbsp;</label><button type="submit">Filter</button></div>
</form>
<% if (it.filterError) { %><p class="field-error" role="alert"><%= it.filterError %></p><% } %>
<%~ it.table %>
`;

export const RUN = `<hgroup>
  <h1>Run <code><%= it.run.runId %></code></h1>
  <p>App <a href="/dashboard/apps/<%= it.run.appName %>"><%= it.run.appName %></a>, path <code><%= it.run.path %></code></p>
</hgroup>
<div id="run-detail"<% if (!it.run.terminal || it.run.awaitingWebhook) { %> hx-get="<%= it.refreshUrl %>" hx-trigger="every <%= it.refreshSeconds %>s" hx-select="#run-detail" hx-swap="outerHTML"<% } %>>
<dl class="grid-dl">
  <dt>Mode</dt><dd><span class="mode"><%= it.run.mode %></span></dd>
  <dt>State</dt><dd><span class="state state-<%= it.run.state %>"><%= it.run.state %></span><% if (it.run.cancelRequested && !it.run.terminal) { %> (cancelling…)<% } %></dd>
  <dt>Queued</dt><dd><time datetime="<%= it.run.createdAt %>"><%= it.run.created %></time></dd>
  <dt>Started</dt><dd><%= it.run.started || '—' %></dd>
  <dt>Finished</dt><dd><%= it.run.finished || '—' %></dd>
  <dt>Timing</dt><dd><%= it.run.timing %></dd>
  <dt>Executions</dt><dd><%= it.run.executions %></dd>
<% if (it.run.responseStatus !== undefined) { %>
  <dt>App answered</dt><dd>HTTP <%= it.run.responseStatus %></dd>
<% } %>
<% if (it.run.error) { %>
  <dt>Error</dt><dd><%= it.run.error %></dd>
<% } %>
</dl>
<% if (it.run.cancellable) { %>
<form method="post" action="<%= it.run.cancelUrl %>">
  <input type="hidden" name="_csrf" value="<%= it.csrf %>">
  <input type="hidden" name="back" value="<%= it.run.href %>">
  <button type="submit" class="secondary">Cancel this run</button>
</form>
<% } %>
<h2>Webhook</h2>
<% if (!it.run.webhook) { %>
<p class="muted">This run does not forward its result (no <code>webhookEndpoint</code>).</p>
<% } else { %>
<p>To <strong><%= it.run.webhook.host %></strong><% if (it.run.webhook.state) { %>: <span class="state state-<%= it.run.webhook.state %>"><%= it.run.webhook.state %></span><% } %></p>
<% if (it.run.webhook.attempts.length === 0) { %>
<p class="muted">No delivery attempt yet: the result is forwarded when the run finishes.</p>
<% } else { %>
<div class="table-wrap"><table class="stack">
  <thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Outcome</th><th scope="col">Status</th><th scope="col">Took</th></tr></thead>
  <tbody>
<% for (const a of it.run.webhook.attempts) { %>
    <tr><td data-label="Attempt">#<%= a.attempt %></td><td data-label="Time"><time datetime="<%= a.at %>"><%= a.time %></time></td><td data-label="Outcome"><%= a.outcome %><% if (a.error) { %>: <%= a.error %><% } %></td><td data-label="Status"><%= a.status %></td><td data-label="Took"><%= a.took %></td></tr>
<% } %>
  </tbody>
</table></div>
<% } %>
<% } %>
<h2>Result</h2>
<% if (it.run.result) { %>
<%~ include('@runResult', { result: it.run.result, meta: true }) %>
<% } else { %>
<p class="muted"><%= it.run.resultNote || 'No result.' %></p>
<% } %>
</div>
<p><a href="/dashboard/runs?app=<%= it.run.appName %>">All runs of <%= it.run.appName %></a></p>
`;

/**
 * A run's result: its metadata and marks (`meta`), and the formatted body when it was read. Also the
 * fragment a run-table row loads when its result is opened.
 */
export const RUN_RESULT = `<% const r = it.result; %>
<% if (!r) { %>
<p class="muted">No result was kept for this run.</p>
<% } else { %>
<% if (it.meta) { %>
<p class="result-summary"><%= r.summary %></p>
<% if (r.marks.length > 0) { %>
<ul class="result-marks">
<% for (const m of r.marks) { %>
  <li class="mark" data-mark="<%= m.kind %>"><%= m.text %></li>
<% } %>
</ul>
<% } %>
<% } %>
<% if (r.shown) { %>
<pre class="result" tabindex="0" aria-label="Result"><code><%= r.shown.text %></code></pre>
<% if (r.shown.truncated) { %><p class="muted"><small>Shown here: the first <%= r.shown.shownBytes %> bytes. The API gives all that is kept: <code>GET /v2/projects/{project}/runs/{run_id}</code>.</small></p><% } %>
<% } else if (r.binary) { %>
<p class="muted">Binary content: not shown here (the API gives it as base64).</p>
<% } else if (r.marks.some((m) => m.kind === 'dropped' || m.kind === 'expired')) { %>
<% if (!it.meta) { %><p class="muted"><%= r.marks.map((m) => m.text).join('; ') %></p><% } %>
<% } else { %>
<p class="muted">Empty.</p>
<% } %>
<% } %>
`;
