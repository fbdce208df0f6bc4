// The submit form helps: priority classes follow the job kind, the accelerator follows the team
// (until the user picks one), the quota left for the chosen team and accelerator is shown, and
// the scheduler's answer to "when would it start if I submitted now" is fetched as fields change.
(function () {
  var form = document.getElementById("submit-form");
  if (!form) return;
  var hints = JSON.parse(document.getElementById("quota-hints").textContent);
  var kind = form.elements.kind, klass = form.elements.priority_class;
  var team = form.elements.team, accelerator = form.elements.accelerator_type;
  var acceleratorChosen = form.hasAttribute("data-bound");  // a re-shown form keeps its choice

  // Classes come highest first; a new kind preselects its normal (lowest) class, as the server does.
  function offerClassesForKind() {
    var normal = null;
    Array.prototype.forEach.call(klass.options, function (option) {
      var fits = !option.dataset.kind || option.dataset.kind === kind.value;
      option.hidden = !fits;
      option.disabled = !fits;
      if (fits) normal = option;
    });
    var selected = klass.options[klass.selectedIndex];
    if ((!selected || selected.disabled) && normal) klass.value = normal.value;
  }

  function showQuotaLeft() {
    var teamHints = hints[team.value] || { left: {} };
    if (!acceleratorChosen && teamHints["default"]) accelerator.value = String(teamHints["default"]);
    // The sentence is the server's (QuotaLeft.text), one per team and accelerator type.
    document.getElementById("quota-left").textContent = teamHints.left[accelerator.value] || "";
  }

  var preview = Fleetline.Part("start-preview", function () {
    var params = new URLSearchParams(new FormData(form));
    params["delete"]("csrfmiddlewaretoken");
    return form.dataset.estimateUrl + "?" + params.toString();
  });
  var timer = null;
  function previewSoon() { clearTimeout(timer); timer = setTimeout(preview.refresh, 300); }

  kind.addEventListener("change", offerClassesForKind);
  accelerator.addEventListener("change", function () { acceleratorChosen = true; });
  team.addEventListener("change", showQuotaLeft);
  accelerator.addEventListener("change", showQuotaLeft);
  form.addEventListener("input", previewSoon);
  form.addEventListener("change", previewSoon);
  offerClassesForKind();
  showQuotaLeft();
  previewSoon();
})();
