/** The page frame: navigation, one stylesheet, htmx and our script (files only: the CSP has no inline script). */
export const LAYOUT = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="htmx-config" content='{"includeIndicatorCSS": false}'>
<link rel="icon" href="data:,">
<title><%= it.title %> · apphost</title>
<link rel="stylesheet" href="<%= it.assets.css %>">
<script src="<%= it.assets.htmx %>" defer></script>
<script src="<%= it.assets.script %>" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="container site">
  <nav aria-label="Main">
    <ul>
      <li><a href="/dashboard" class="contrast">apphost</a></li>
<% if (it.session) { %>
      <li class="muted hide-narrow">project <strong><%= it.session.projectId %></strong></li>
<% } %>
    </ul>
<% if (it.session) { %>
    <ul>
<% for (const item of it.nav) { %>
      <li><a href="<%= item.href %>"<% if (item.current) { %> aria-current="page"<% } %>><%= item.label %></a></li>
<% } %>
      <li>
        <form method="post" action="/dashboard/sign-out" class="sign-out">
          <input type="hidden" name="_csrf" value="<%= it.session.csrf %>">
          <button type="submit" class="secondary outline">Sign out</button>
        </form>
      </li>
    </ul>
<% } %>
  </nav>
</header>
<main class="container" id="main" tabindex="-1">
<% if (it.notice) { %>
  <article class="notice" role="status"><%= it.notice %></article>
<% } %>
<%~ it.body %>
</main>
</body>
</html>
`;
