// A team's page: its usage chart (a figure built on the server), and a quota decision, which
// arrives as a notice, brings the request's status and the quota up to date.
(function () {
  var data = document.getElementById("team-usage-data");
  if (data) {
    var figure = JSON.parse(JSON.parse(data.textContent));
    Plotly.newPlot("team-usage-chart", figure.data, figure.layout, { displaylogo: false, responsive: true });
  }
  Fleetline.live.on("notice", function () { Fleetline.refreshFrom(location.href, ["quota-table", "request-history"]); });
})();
