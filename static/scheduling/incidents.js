// Incidents: a new or advanced incident re-reads the table from the server, which renders its
// rows (kinds, times, gangs) as on the first load.
(function () {
  if (!document.getElementById("incidents")) return;
  Fleetline.live.on("incident", function () { Fleetline.refreshFrom(location.href, ["incidents"]); });
})();
