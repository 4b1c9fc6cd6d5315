/**
 * Our only script (served as a file: the CSP allows no inline script). Progressive: every page works
 * without it; it adds the token copy button and the live log tail.
 */
export const DASHBOARD_JS = `'use strict';
(() => {
  // Copy buttons: <button data-copy="ID"> copies the text of #ID.
  document.addEventListener('click', async (e) => {
    const button = e.target instanceof Element ? e.target.closest('button[data-copy]') : null;
    if (!button) return;
    const source = document.getElementById(button.getAttribute('data-copy') || '');
    if (!source) return;
    const status = document.getElementById(button.getAttribute('aria-describedby') || '');
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      if (status) status.textContent = 'Copied to the clipboard.';
    } catch {
      // No clipboard permission (plain HTTP on another host): select the text for Ctrl+C instead.
      const range = document.createRange();
      range.selectNodeContents(source);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      if (status) status.textContent = 'Selected: press Ctrl+C (or Cmd+C) to copy.';
    }
  });
  document.querySelectorAll('button[data-copy]').forEach((b) => { b.hidden = false; });

  // Live log tail: <pre data-log-src="URL"> appends each server-sent event's data as a line.
  document.querySelectorAll('pre[data-log-src]').forEach((pre) => {
    const source = new EventSource(pre.getAttribute('data-log-src'));
    const max = Number(pre.getAttribute('data-log-max') || 500);
    source.onmessage = (ev) => {
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode(ev.data + '\\n'));
      while (pre.childNodes.length > max) pre.removeChild(pre.firstChild);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    };
  });
})();
`;
