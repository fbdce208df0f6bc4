// Jobs list: the rows follow the live feed, re-read from the server (which renders them) at most
// every two seconds however many jobs change. Elapsed and remaining times count on between reads
// (fleet_clock.js).
(function () {
  var params = new URLSearchParams(location.search);
  params.set("part", "rows");
  var rows = Fleetline.Part("job-rows", function () { return location.pathname + "?" + params.toString(); }, null, 2000);
  var counts = null;
  // Re-read the rows when the socket (re)connects, when one of the listed teams' jobs changes,
  // when a tick changes why a listed job waits or when it should start, and when the fleet's
  // queue changes size (a job was submitted or ended): new rows arrive live.
  Fleetline.live.onOpen(rows.refresh);
  Fleetline.live.on("job", rows.refresh);
  Fleetline.live.on("waits", function (event) {
    if (event.jobs.some(function (job) { return document.getElementById("job-" + job.id); })) rows.refresh();
  });
  Fleetline.live.on("fleet", function (event) {
    var now = event.pending_jobs + "/" + event.running_jobs;
    if (counts !== null && counts !== now) rows.refresh();
    counts = now;
  });
})();
