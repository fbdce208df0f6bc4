// A job's page: on every (re)connect it re-reads the job, then re-reads it on each of its events
// and whenever a tick changes why it waits or when it should start (a "waits" event naming it);
// the server renders state, estimate, reason, controls and history from one read. The job comes
// from the data- attributes of #job-live. Elapsed and remaining times count on between reads
// (fleet_clock.js).
(function () {
  var live = document.getElementById("job-live");
  if (!live) return;
  var jobId = +live.dataset.jobId, name = live.dataset.jobName, shown = live.dataset.state;
  var part = Fleetline.Part("job-live", function () { return live.dataset.liveUrl; }, function (element) {
    var stats = element.querySelector("#job-stats");
    if (stats && stats.dataset.state !== shown) {
      shown = stats.dataset.state;
      Fleetline.announce(name + " is now " + element.querySelector("#job-state").textContent);
    }
  });
  Fleetline.live.onOpen(part.refresh);
  Fleetline.live.on("job", function (event) { if (event.id === jobId) part.refresh(); });
  Fleetline.live.on("waits", function (event) {
    if (event.jobs.some(function (job) { return job.id === jobId; })) part.refresh();
  });
})();
