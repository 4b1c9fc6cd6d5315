export const SIGN_IN = `<h1>Sign in</h1>
<p>Paste a service-account token of your project (it starts with <code>ahsa_</code>). It is checked once and
never stored: you get a session that ends when you sign out, when the token expires or when it is revoked.</p>
<form method="post" action="/dashboard/sign-in" novalidate>
  <input type="hidden" name="_csrf" value="<%= it.csrf %>">
  <label for="token">Service-account token</label>
  <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required
    <% if (it.error) { %>aria-invalid="true" aria-describedby="token-error"<% } %> autofocus>
<% if (it.error) { %>
  <small id="token-error" class="field-error"><%= it.error %></small>
<% } %>
  <button type="submit">Sign in</button>
</form>
<details>
  <summary>No token yet?</summary>
  <p>Locally, <code>apphost dev</code> prints one (<code>service_account_token</code> in
  <code>.apphost/credentials.json</code>). In a cluster, create the first one with your kubeconfig:</p>
  <pre><code>apphost create-service-account --project PROJECT --name admin --expires 2027-01-01</code></pre>
</details>
`;
