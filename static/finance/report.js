// The chargeback report's charts: figures built on the server (finance/charts.py).
(function () {
  "use strict";
  var config = { displaylogo: false, responsive: true };
  function figure(id) { return JSON.parse(JSON.parse(document.getElementById(id).textContent)); }
  [["gpu-hours-chart", "gpu-hours-data"], ["cost-chart", "cost-data"], ["share-chart", "share-data"]].forEach(function (pair) {
    var f = figure(pair[1]);
    Plotly.newPlot(pair[0], f.data, f.layout, config);
  });
})();
