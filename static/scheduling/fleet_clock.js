// Times counted on the fleet clock keep counting on an open page: each scheduling tick's "fleet"
// event brings the fleet's time (sim_time_s), and every element that names a fleet second shows
// how far it lies from it, in the words the server's `duration` and `starts_in` filters use:
//   data-fleet-since="S"   time since S ("1h 05m": how long a job has run)
//   data-fleet-until="S"   time until S ("12m": how long a time limit leaves)
//   data-fleet-starts="S"  when a pending job should start ("in 2h 05m", or "now")
// Parts of the page that the server renders anew bring their own fleet seconds along.
(function () {
  function duration(seconds) {
    var total = Math.max(0, Math.round(seconds / 60));
    var days = Math.floor(total / 1440), rest = total % 1440;
    var hours = Math.floor(rest / 60), minutes = rest % 60;
    if (days) return days + "d " + hours + "h";
    if (hours) return hours + "h " + (minutes < 10 ? "0" : "") + minutes + "m";
    return minutes + "m";
  }
  function show(nowS) {
    document.querySelectorAll("[data-fleet-since]").forEach(function (element) {
      element.textContent = duration(nowS - +element.dataset.fleetSince);
    });
    document.querySelectorAll("[data-fleet-until]").forEach(function (element) {
      element.textContent = duration(+element.dataset.fleetUntil - nowS);
    });
    document.querySelectorAll("[data-fleet-starts]").forEach(function (element) {
      var wait = +element.dataset.fleetStarts - nowS;
      element.textContent = wait <= 60 ? "now" : "in " + duration(wait);
    });
  }
  window.Fleetline = window.Fleetline || {};
  Fleetline.fleetDuration = duration;
  Fleetline.live.on("fleet", function (event) { show(event.sim_time_s); });
})();
