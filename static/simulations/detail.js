// A replay's page follows its progress and shows the results once it has ended. The progress
// URL comes from the progress bar's data-progress-url; the state's label from the server.
(function () {
  var bar = document.getElementById("simulation-progress");
  if (!bar) return;
  var url = bar.dataset.progressUrl;
  var percent = document.getElementById("simulation-percent");
  var state = document.getElementById("simulation-state");
  var done = false;
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (status) {
        if (status === null) return;
        if (status.finished) { done = true; window.location.reload(); return; }
        bar.value = status.progress;
        percent.textContent = Math.round(status.progress * 100) + "%";
        state.textContent = status.state_label;
      })
      .catch(function () { /* the next poll tries again */ })
      .finally(function () { if (!done) window.setTimeout(poll, 1000); });
  }
  window.setTimeout(poll, 1000);
})();
