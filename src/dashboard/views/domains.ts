export const DOMAINS = `<hgroup>
  <h1>Domains</h1>
  <p>Custom hostnames of project <strong><%= it.projectId %></strong> and the app each one routes to.</p>
</hgroup>
<% if (it.domains.length === 0) { %>
<div class="empty" role="status">
  <p><strong>No custom domains.</strong> Add a hostname below, assign it to an app, then point the host's DNS
  at the apphost gateway: calls to <code>https://HOST/&lt;function&gt;</code> reach the app.</p>
</div>
<% } else { %>
<div class="table-wrap">
<table class="stack">
  <caption class="muted">Domains, by id</caption>
  <thead><tr><th scope="col">Hostname</th><th scope="col">App</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
  <tbody>
<% for (const d of it.domains) { %>
    <tr data-domain="<%= d.domainId %>">
      <th scope="row"><%= d.hostname %><br><small class="muted">id <%= d.domainId %></small></th>
      <td data-label="App"><%= d.appName || '—' %></td>
      <td data-label="Status"><span class="state state-<%= d.status.status %>"><%= d.status.reason %></span><br><small class="muted"><%= d.status.message %></small></td>
      <td><div class="actions">
        <form method="get" action="/dashboard/domains/<%= d.domainId %>/assign" class="inline-form">
          <label for="assign-<%= d.domainId %>" class="visually-hidden">App for <%= d.hostname %></label>
          <select id="assign-<%= d.domainId %>" name="app"<% if (it.apps.length === 0) { %> disabled<% } %>>
<% for (const a of it.apps) { %>
            <option value="<%= a %>"<% if (a === d.appName) { %> selected<% } %>><%= a %></option>
<% } %>
          </select>
          <button type="submit" class="secondary outline"<% if (it.apps.length === 0) { %> disabled<% } %>>Assign<span class="visually-hidden"> <%= d.hostname %></span></button>
        </form>
<% if (d.appName) { %>
        <a role="button" class="secondary" href="/dashboard/domains/<%= d.domainId %>/unassign">Unassign<span class="visually-hidden"> <%= d.hostname %></span></a>
<% } %>
      </div></td>
    </tr>
<% } %>
  </tbody>
</table>
</div>
<% } %>
<section aria-labelledby="add-domain">
  <h2 id="add-domain">Add a domain</h2>
  <form method="post" action="/dashboard/domains" novalidate>
    <input type="hidden" name="_csrf" value="<%= it.csrf %>">
    <div class="grid">
      <div>
        <label for="hostname">Hostname</label>
        <input id="hostname" name="hostname" value="<%= it.form.hostname %>" required autocomplete="off" placeholder="api.example.com"
          aria-describedby="hostname-help<% if (it.errors.hostname) { %> hostname-error<% } %>"<% if (it.errors.hostname) { %> aria-invalid="true"<% } %>>
        <small id="hostname-help">A fully qualified hostname, unique across apphost.</small>
<% if (it.errors.hostname) { %>
        <small id="hostname-error" class="field-error"><%= it.errors.hostname %></small>
<% } %>
      </div>
      <div>
        <label for="domain_id">Id (optional)</label>
        <input id="domain_id" name="domain_id" value="<%= it.form.domain_id %>" autocomplete="off" maxlength="63"
          aria-describedby="domain_id-help<% if (it.errors.domain_id) { %> domain_id-error<% } %>"<% if (it.errors.domain_id) { %> aria-invalid="true"<% } %>>
        <small id="domain_id-help">Defaults to the hostname with dots as dashes.</small>
<% if (it.errors.domain_id) { %>
        <small id="domain_id-error" class="field-error"><%= it.errors.domain_id %></small>
<% } %>
      </div>
    </div>
    <button type="submit">Add domain</button>
  </form>
</section>
`;
