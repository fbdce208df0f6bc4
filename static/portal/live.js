// One websocket per page to /ws/fleet/; handlers subscribe by event kind.
// Reconnects with backoff so a restarted server does not leave the page stale.
window.Fleetline = window.Fleetline || {};
Fleetline.live = (function () {
  var handlers = {};
  var delayMs = 500;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + "/ws/fleet/");
    socket.onopen = function () { delayMs = 500; document.body.dataset.live = "open"; };
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
  };
})();

// Fleet-clock seconds as "day 3, 14:05", matching the server's fleet_time filter.
Fleetline.fleetTime = function (seconds) {
  var total = Math.floor(seconds / 60), days = Math.floor(total / 1440), rest = total % 1440;
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  return "day " + (days + 1) + ", " + pad(Math.floor(rest / 60)) + ":" + pad(rest % 60);
};

// A job state as the server renders it: "timed_out" -> "Timed out".
Fleetline.stateLabel = function (state) {
  var text = state.replace("_", " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
};
