// A team's page: its usage chart (a figure built on the server), and a quota decision, which
// arrives as a notice, brings the request's status and the quota up to date. The pending jobs
// follow the live feed: a tick that changes why one of the team's jobs waits or when it should
// start (a "waits" event), or a change of one of its jobs, re-reads the table; its start times
// count down between reads (fleet_clock.js).
(function () {
  var data = document.getElementById("team-usage-data");
  if (data) {
    var figure = JSON.parse(JSON.parse(data.textContent));
    Plotly.newPlot("team-usage-chart", figure.data, figure.layout, { displaylogo: false, responsive: true });
  }
  Fleetline.live.on("notice", function () { Fleetline.refreshFrom(location.href, ["quota-table", "request-history"]); });
  var pending = document.getElementById("pending-jobs");
  if (!pending) return;
  var teamId = +pending.dataset.teamId;
  function ours(job) { return job.team === teamId; }
  Fleetline.live.on("waits", function (event) {
    if (event.jobs.some(ours)) Fleetline.refreshFrom(location.href, ["pending-jobs"]);
  });
  Fleetline.live.on("job", function (event) {
    if (ours(event)) Fleetline.refreshFrom(location.href, ["pending-jobs"]);
  });
})();
