export const APPS = `<hgroup>
  <h1>Apps</h1>
  <p>Apps of project <strong><%= it.projectId %></strong>.</p>
</hgroup>
<% if (it.apps.length === 0) { %>
<div class="empty" role="status">
  <p><strong>No apps yet.</strong> An app is a folder with a <code>main.py</code> whose functions become HTTP
  endpoints. Locally, put one beside <code>examples/apps/hello</code> and <code>apphost dev</code> picks it up;
  in a cluster, apply an <code>App</code> resource (see docs/runtimes.md).</p>
</div>
<% } else { %>
<div class="table-wrap">
<table class="stack">
  <caption class="muted">Apps, by name</caption>
  <thead><tr><th scope="col">App</th><th scope="col">Runtime</th><th scope="col">Replicas ready / desired</th><th scope="col">In flight</th><th scope="col">Version</th><th scope="col">URL</th></tr></thead>
  <tbody>
<% for (const a of it.apps) { %>
    <tr data-app="<%= a.name %>">
      <th scope="row"><a href="/dashboard/apps/<%= a.name %>"><%= a.name %></a></th>
      <td data-label="Runtime"><%= a.runtime %></td>
      <td data-label="Replicas ready / desired"><%= a.replicas %></td>
      <td data-label="In flight"><%= a.inFlight %></td>
      <td data-label="Version"><% if (a.version.buildId || a.version.bundle) { %><code title="<%= a.version.bundle || '' %>"><%= a.version.label %></code><% } else { %><%= a.version.label %><% } %></td>
      <td data-label="URL"><code class="curl"><%= a.url %></code></td>
    </tr>
<% } %>
  </tbody>
</table>
</div>
<p class="muted"><small>Call a function with <code>POST &lt;URL&gt;/&lt;function&gt;</code> and a run token; each app's page has a curl line.</small></p>
<% } %>
`;

export const APP = `<hgroup>
  <h1><%= it.app.name %></h1>
  <p><%= it.app.runtime %> app of project <strong><%= it.projectId %></strong><% if (it.app.ready) { %> · <span class="state state-<%= it.app.ready.status %>"><%= it.app.ready.label %></span><% } %></p>
</hgroup>
<dl class="grid-dl">
  <dt>Replicas ready / desired</dt><dd><%= it.app.replicas %></dd>
  <dt>In flight</dt><dd><%= it.app.inFlight %></dd>
  <dt>Version</dt><dd><% if (it.app.version.buildId) { %>build <code><%= it.app.version.buildId %></code><% } else if (!it.app.version.bundle) { %><%= it.app.version.label %> <small class="muted">(not deployed with apphost deploy)</small><% } else { %>bundle only<% } %></dd>
<% if (it.app.version.bundle) { %>
  <dt>Bundle</dt><dd><code class="curl"><%= it.app.version.bundle %></code></dd>
<% } %>
<% if (it.app.version.dependencies) { %>
  <dt>Dependencies</dt><dd><code class="curl"><%= it.app.version.dependencies %></code></dd>
<% } %>
  <dt>URL</dt><dd><code class="curl"><%= it.app.url %></code></dd>
</dl>
<h2>Call it</h2>
<p>A run token comes from <code>POST <%= it.baseUrl %>/v2/projects/<%= it.projectId %>/run-tokens</code>
(see docs/management.md); <code>run</code> stands for your function's name.</p>
<pre class="curl"><code><%= it.app.curl %></code></pre>
<h2>Recent runs</h2>
<%~ it.runsTable %>
<h2 id="logs-heading">Logs</h2>
<% if (it.logs) { %>
<p class="muted log-status" id="log-status" role="status">The last <%= it.logs.max %> lines when the page was made (times in UTC).</p>
<pre class="logs" id="log-tail" data-log-src="<%= it.logs.stream %>" data-log-max="<%= it.logs.max %>" data-log-status="log-status" aria-live="off" tabindex="0" aria-labelledby="logs-heading"><%= it.logs.text %></pre>
<% } else { %>
<p class="muted">This server cannot read the app's logs.</p>
<% } %>
<h2>Configuration</h2>
<pre class="config" tabindex="0" aria-label="Configuration of <%= it.app.name %>"><code><%= it.app.config %></code></pre>
`;
