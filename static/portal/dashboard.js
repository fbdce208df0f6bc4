// Dashboard: draws the server-rendered figures, then extends them with every live fleet tick.
// Every text it shows (the fleet clock, the summary sentence) comes from the server in the event.
(function () {
  var MAX_POINTS = 600;
  function figure(id) { return JSON.parse(JSON.parse(document.getElementById(id).textContent)); }
  var config = { displaylogo: false, responsive: true };
  var share = figure("share-data"), util = figure("utilisation-data"), teams = figure("team-data");
  Plotly.newPlot("share-chart", share.data, share.layout, config);
  Plotly.newPlot("utilisation-chart", util.data, util.layout, config);
  Plotly.newPlot("team-chart", teams.data, teams.layout, config);

  // Whole-number ticks on the pending-jobs axis, about five of them (as core.charts does).
  function countTickStep(largest) {
    var step = 1;
    while (largest / step > 5) step = String(step).charAt(0) === "2" ? step * 5 / 2 : step * 2;
    return step;
  }
  var pendingMax = Math.max.apply(null, [0].concat(util.data[1].y || []));
  var pendingStep = countTickStep(pendingMax);

  function text(id, value) { var el = document.getElementById(id); if (el) el.textContent = value; }

  Fleetline.live.on("heartbeat", function (event) {
    text("heartbeat-seq", event.seq);
    text("fleet-gpus", event.gpus);
    text("fleet-healthy", event.healthy_gpus);
    text("fleet-nodes", event.nodes);
    text("heartbeat-status", "at " + new Date(event.sent_at).toLocaleTimeString());
  });

  Fleetline.live.on("fleet", function (event) {
    var hours = event.sim_time_s / 3600;
    text("fleet-utilisation", Math.round(100 * event.utilisation) + "%");
    text("fleet-serving", event.serving_gpus);
    text("fleet-training", event.training_gpus);
    text("fleet-pending", event.pending_jobs);
    text("fleet-time", event.fleet_time);
    Plotly.extendTraces("share-chart", {
      x: [[hours], [hours], [hours], [hours]],
      y: [[event.serving_gpus], [event.training_gpus], [event.batch_gpus], [event.idle_gpus]],
    }, [0, 1, 2, 3], MAX_POINTS);
    Plotly.extendTraces("utilisation-chart", {
      x: [[hours], [hours]], y: [[100 * event.utilisation], [event.pending_jobs]],
    }, [0, 1], MAX_POINTS);
    pendingMax = Math.max(pendingMax, event.pending_jobs);
    if (countTickStep(pendingMax) !== pendingStep) {
      pendingStep = countTickStep(pendingMax);
      Plotly.relayout("utilisation-chart", { "yaxis2.dtick": pendingStep });
    }
    text("share-summary", event.summary);
  });
})();
