/** A confirmation step before anything destructive: works without script and with the keyboard alone. */
export const CONFIRM = `<h1><%= it.title %></h1>
<article>
  <p><%= it.message %></p>
  <form method="post" action="<%= it.action %>" novalidate>
    <input type="hidden" name="_csrf" value="<%= it.csrf %>">
<% for (const [name, value] of Object.entries(it.hidden)) { %>
    <input type="hidden" name="<%= name %>" value="<%= value %>">
<% } %>
<% if (it.field) { %>
    <label for="<%= it.field.name %>"><%= it.field.label %></label>
    <input id="<%= it.field.name %>" name="<%= it.field.name %>" type="<%= it.field.type %>" value="<%= it.field.value %>"
      <% if (it.field.min) { %>min="<%= it.field.min %>"<% } %> required
      <% if (it.field.error) { %>aria-invalid="true" aria-describedby="<%= it.field.name %>-error"<% } %>>
<% if (it.field.error) { %>
    <small id="<%= it.field.name %>-error" class="field-error"><%= it.field.error %></small>
<% } %>
<% } %>
<% if (it.error) { %>
    <p class="field-error" role="alert"><%= it.error %></p>
<% } %>
    <div class="actions">
      <button type="submit" class="<%= it.danger ? 'danger' : '' %>" autofocus><%= it.confirm %></button>
      <a href="<%= it.back %>" role="button" class="secondary outline">Cancel</a>
    </div>
  </form>
</article>
`;

export const ERROR = `<h1><%= it.title %></h1>
<p><%= it.message %></p>
<p><a href="<%= it.back %>">Back</a></p>
`;
