export const KEYS = `<hgroup>
  <h1>API Keys</h1>
  <p>Service accounts of project <strong><%= it.projectId %></strong>. A token authenticates calls to the
  management API (<code>Authorization: Bearer …</code>); keep one per environment and rotate them regularly.</p>
</hgroup>
<% if (it.accounts.length === 0) { %>
<div class="empty" role="status">
  <p><strong>No API keys.</strong> Create one below for each environment (CI, staging, production)
  and store its token as a secret.</p>
</div>
<% } else { %>
<div class="table-wrap">
<table class="stack">
  <caption class="muted">Keys, by name</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
  <tbody>
<% for (const a of it.accounts) { %>
    <tr data-key="<%= a.name %>">
      <th scope="row"><%= a.name %><% if (a.current) { %> <small class="muted">(this session)</small><% } %></th>
      <td data-label="State"><span class="state state-<%= a.stateClass %>"><%= a.state %></span></td>
      <td data-label="Created"><time datetime="<%= a.createdAt %>"><%= a.created %></time></td>
      <td data-label="Expires"><time datetime="<%= a.expiresAt %>"><%= a.expires %></time></td>
      <td data-label="Last used"><% if (a.lastUsedAt) { %><time datetime="<%= a.lastUsedAt %>"><%= a.lastUsed %></time><% } else { %><span class="muted">never</span><% } %></td>
      <td><div class="actions">
        <a role="button" class="secondary outline" href="/dashboard/keys/<%= a.name %>/rotate">Rotate<span class="visually-hidden"> <%= a.name %></span></a>
        <a role="button" class="secondary" href="/dashboard/keys/<%= a.name %>/revoke">Revoke<span class="visually-hidden"> <%= a.name %></span></a>
      </div></td>
    </tr>
<% } %>
  </tbody>
</table>
</div>
<% } %>
<section aria-labelledby="create-key">
  <h2 id="create-key">Create a key</h2>
  <form method="post" action="/dashboard/keys" novalidate>
    <input type="hidden" name="_csrf" value="<%= it.csrf %>">
    <div class="grid">
      <div>
        <label for="name">Name</label>
        <input id="name" name="name" value="<%= it.form.name %>" required maxlength="52" autocomplete="off"
          aria-describedby="name-help<% if (it.errors.name) { %> name-error<% } %>"<% if (it.errors.name) { %> aria-invalid="true"<% } %>>
        <small id="name-help">Lowercase letters, digits and -, e.g. <code>ci</code> or <code>production</code>.</small>
<% if (it.errors.name) { %>
        <small id="name-error" class="field-error"><%= it.errors.name %></small>
<% } %>
      </div>
      <div>
        <label for="expires_at">Expires on</label>
        <input id="expires_at" name="expires_at" type="date" value="<%= it.form.expires_at %>" min="<%= it.minDate %>" max="<%= it.maxDate %>" required
          aria-describedby="expires-help<% if (it.errors.expires_at) { %> expires_at-error<% } %>"<% if (it.errors.expires_at) { %> aria-invalid="true"<% } %>>
        <small id="expires-help">The token stops working at 00:00 UTC that day.</small>
<% if (it.errors.expires_at) { %>
        <small id="expires_at-error" class="field-error"><%= it.errors.expires_at %></small>
<% } %>
      </div>
    </div>
    <button type="submit">Create key</button>
  </form>
</section>
`;

/** The token, shown exactly once (the response is not cached). */
export const KEY_TOKEN = `<hgroup>
  <h1><%= it.heading %></h1>
  <p>Key <strong><%= it.name %></strong> of project <strong><%= it.projectId %></strong>, valid until
  <time datetime="<%= it.expiresAt %>"><%= it.expires %></time>.</p>
</hgroup>
<article aria-labelledby="token-heading">
  <h2 id="token-heading">Copy the token now</h2>
  <p><strong>It is shown only this once</strong>: apphost keeps only a hash of it. Store it as a secret
  (never in source control). If you lose it, rotate the key.</p>
  <pre class="token"><code id="new-token"><%= it.token %></code></pre>
  <div class="actions">
    <button type="button" data-copy="new-token" aria-describedby="copy-status" hidden>Copy token</button>
    <span id="copy-status" role="status" class="muted"></span>
  </div>
  <p>Try it:</p>
  <pre class="curl"><code>curl -H "Authorization: Bearer $APPHOST_TOKEN" <%= it.baseUrl %>/v2/projects/<%= it.projectId %>/domains</code></pre>
</article>
<p><a href="/dashboard/keys">Back to API Keys</a></p>
`;
