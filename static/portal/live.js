// One websocket per page to /ws/fleet/; handlers subscribe by event kind.
// Reconnects with backoff so a restarted server does not leave the page stale.
// The layout loads this file on every page and pages may load it again: only the first runs.
if (!(window.Fleetline && window.Fleetline.live)) {
window.Fleetline = window.Fleetline || {};
Fleetline.live = (function () {
  var handlers = {};
  var openHandlers = [];
  var delayMs = 500;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + "/ws/fleet/");
    socket.onopen = function () {
      delayMs = 500;
      document.body.dataset.live = "open";
      // Events sent while the socket was not connected (before it first opened, or between a
      // drop and this reconnect) never arrive: pages re-read their state now instead.
      openHandlers.forEach(function (fn) { fn(); });
    };
    socket.onmessage = function (message) {
      var event = JSON.parse(message.data);
      // A tick's job changes arrive as one batch; handlers see them one job at a time.
      var events = event.kind === "jobs" ? event.jobs.map(function (job) { job.kind = "job"; return job; }) : [event];
      events.forEach(function (one) {
        (handlers[one.kind] || []).forEach(function (fn) { fn(one); });
      });
    };
    socket.onclose = function () {
      document.body.dataset.live = "closed";
      setTimeout(connect, delayMs);
      delayMs = Math.min(delayMs * 2, 10000);
    };
  }
  document.addEventListener("DOMContentLoaded", connect);
  return {
    on: function (kind, fn) { (handlers[kind] = handlers[kind] || []).push(fn); },
    onOpen: function (fn) { openHandlers.push(fn); },
  };
})();

// Keeps one server-rendered part of a page current: `refresh()` fetches `url()` and swaps the
// element's content for the answer. One fetch at a time, and a refresh asked for while one is
// in flight runs after it, so an older answer never replaces a newer one. The server renders
// the same template as the full page, so controls follow the state (no Cancel on an ended job).
// `minGapMs` spaces fetches out (a list that many events touch re-reads at most that often).
Fleetline.Part = function (elementId, url, afterSwap, minGapMs) {
  var busy = false, again = false, lastAt = 0, timer = null;
  function refresh() {
    if (busy) { again = true; return; }
    var wait = (minGapMs || 0) - (Date.now() - lastAt);
    if (wait > 0) {
      if (timer === null) timer = setTimeout(function () { timer = null; refresh(); }, wait);
      return;
    }
    busy = true; again = false; lastAt = Date.now();
    fetch(url(), { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        var element = document.getElementById(elementId);
        if (html !== null && element) {
          element.innerHTML = html;
          if (afterSwap) afterSwap(element);
        }
      })
      .catch(function () { /* the next event or reconnect refreshes again */ })
      .finally(function () { busy = false; if (again) refresh(); });
  }
  return { refresh: refresh };
};

// Says a short sentence in the page's polite live region, for screen readers.
Fleetline.announce = function (text) {
  var region = document.getElementById("live-announcer");
  if (region && region.textContent !== text) region.textContent = text;
};

// Forms with data-confirm ask first (cancelling a large job, removing a member). Delegated,
// so forms inside refreshed parts of a page ask too.
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) event.preventDefault();
});

// Re-reads elements of this page from the server by id (the same page, rendered anew), for
// parts without a live feed of their own: a quota request decided elsewhere, say.
Fleetline.refreshFrom = function (url, ids) {
  return fetch(url, { credentials: "same-origin" })
    .then(function (response) { return response.ok ? response.text() : null; })
    .then(function (html) {
      if (html === null) return;
      var fresh = new DOMParser().parseFromString(html, "text/html");
      ids.forEach(function (id) {
        var now = document.getElementById(id), next = fresh.getElementById(id);
        if (now && next) now.replaceWith(next);
      });
    })
    .catch(function () { /* the next notice refreshes again */ });
};

// The unread badge follows new notices live, and the notice is said to screen readers.
Fleetline.live.on("notice", function (event) {
  var badge = document.getElementById("unread-count");
  if (badge) {
    badge.textContent = event.unread;
    badge.hidden = !event.unread;
  }
  Fleetline.announce("New notice: " + event.message);
});
}
