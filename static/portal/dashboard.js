// Dashboard: draws the server-rendered figures, then extends them with every live fleet tick.
(function () {
  var MAX_POINTS = 600;
  function figure(id) { return JSON.parse(JSON.parse(document.getElementById(id).textContent)); }
  var config = { displaylogo: false, responsive: true };
  var share = figure("share-data"), util = figure("utilisation-data");
  Plotly.newPlot("share-chart", share.data, share.layout, config);
  Plotly.newPlot("utilisation-chart", util.data, util.layout, config);

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
    var allocated = event.serving_gpus + event.training_gpus + event.batch_gpus;
    var idle = Math.max(0, event.healthy_gpus - allocated);
    text("fleet-utilisation", Math.round(100 * event.utilisation) + "%");
    text("fleet-serving", event.serving_gpus);
    text("fleet-training", event.training_gpus);
    text("fleet-pending", event.pending_jobs);
    text("fleet-time", Fleetline.fleetTime(event.sim_time_s));
    Plotly.extendTraces("share-chart", {
      x: [[hours], [hours], [hours], [hours]],
      y: [[event.serving_gpus], [event.training_gpus], [event.batch_gpus], [idle]],
    }, [0, 1, 2, 3], MAX_POINTS);
    Plotly.extendTraces("utilisation-chart", {
      x: [[hours], [hours]], y: [[100 * event.utilisation], [event.pending_jobs]],
    }, [0, 1], MAX_POINTS);
  });
})();
