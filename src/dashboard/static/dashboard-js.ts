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

  // Live log tail: <pre data-log-src="URL"> follows the server-sent \`log\` events of URL (same origin),
  // keeping the last data-log-max lines. It stops for good on the server's \`end\` event, on an error
  // (no automatic reconnect, which would repeat the tail) and when the page goes away.
  const ENDED = {
    max_duration: 'The live tail stopped after its time limit. Reload the page to follow again.',
    session_ended: 'Your session has ended: sign in again to follow the log.',
    slow_client: 'The live tail stopped: this page could not keep up. Reload the page to follow again.',
    source_ended: 'The log source ended. Reload the page to follow again.',
    source_failed: 'The log could not be read any more. Reload the page to try again.',
  };
  document.querySelectorAll('pre[data-log-src]').forEach((pre) => {
    const max = Number(pre.getAttribute('data-log-max') || 500);
    const status = document.getElementById(pre.getAttribute('data-log-status') || '');
    const say = (text) => { if (status) status.textContent = text; };
    const source = new EventSource(pre.getAttribute('data-log-src'));
    let first = true;
    const stop = (text) => {
      source.close();
      pre.setAttribute('data-log-state', 'stopped');
      if (text) say(text);
    };
    source.addEventListener('open', () => {
      pre.setAttribute('data-log-state', 'live');
      say('Live: new lines appear as the app writes them (times in UTC).');
    });
    source.addEventListener('log', (ev) => {
      let line;
      try { line = JSON.parse(ev.data).text; } catch { return; }
      if (first) {
        // The follow starts with the same last lines the page was made with: replace them.
        pre.textContent = '';
        first = false;
      }
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode((pre.firstChild ? '\\n' : '') + line));
      while (pre.childNodes.length > max) {
        pre.removeChild(pre.firstChild);
        if (pre.firstChild) pre.firstChild.textContent = pre.firstChild.textContent.replace(/^\\n/, '');
      }
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    });
    source.addEventListener('end', (ev) => {
      let reason = '';
      try { reason = JSON.parse(ev.data).reason; } catch {}
      stop(ENDED[reason] || 'The live tail stopped. Reload the page to follow again.');
    });
    source.addEventListener('error', () => {
      if (pre.getAttribute('data-log-state') !== 'stopped')
        stop('The live tail lost its connection. Reload the page to follow again.');
    });
    window.addEventListener('pagehide', () => stop(''));
  });
})();
`;
