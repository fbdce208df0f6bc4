// Fleet map: a hover (or focus) card per node, arrow-key moves between nodes, and for fleet
// admins a click (or Enter) opens the node's actions. Occupancy follows the live fleet feed.
(function () {
  var map = document.getElementById("fleet-map");
  if (!map) return;
  var card = document.getElementById("node-card");
  var jobs = JSON.parse(document.getElementById("node-jobs").textContent);
  var words = JSON.parse(document.getElementById("node-words").textContent);  // the server's wording
  var dialog = document.getElementById("node-dialog");
  var nodes = Array.prototype.slice.call(map.querySelectorAll(".node"));

  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (_, key) { return values[key]; });
  }
  function describe(node) {
    var d = node.dataset, gpus = +d.gpus;
    var text = fill(words.summary, { name: d.name, accelerator: d.accelerator, state: d.state, used: +d.used, gpus: gpus });
    return text + (+d.total > gpus ? fill(words.lost, { lost: +d.total - gpus }) : "");
  }

  // Occupancy bars are sized here rather than by style attributes in the page, which the
  // Content-Security-Policy refuses.
  function occupancy(node) {
    var total = +node.dataset.total || +node.dataset.gpus || 8;
    node.querySelector(".bar").style.width = Math.round(100 * (+node.dataset.used || 0) / total) + "%";
  }
  nodes.forEach(occupancy);

  function show(node) {
    card.textContent = "";
    var title = document.createElement("strong");
    title.textContent = describe(node);
    card.appendChild(title);
    var list = document.createElement("ul");
    (jobs[node.dataset.node] || []).forEach(function (job) {
      var item = document.createElement("li");
      item.textContent = job;
      list.appendChild(item);
    });
    if (!list.children.length) {
      var none = document.createElement("li");
      none.textContent = +node.dataset.used ? words.changed : words.no_jobs;
      list.appendChild(none);
    }
    card.appendChild(list);
    var box = node.getBoundingClientRect();
    card.hidden = false;
    card.style.left = Math.min(window.scrollX + box.left, window.scrollX + document.documentElement.clientWidth - card.offsetWidth - 8) + "px";
    card.style.top = (window.scrollY + box.bottom + 6) + "px";
  }
  function hide() { card.hidden = true; }

  nodes.forEach(function (node, index) {
    node.addEventListener("mouseenter", function () { show(node); });
    node.addEventListener("mouseleave", hide);
    node.addEventListener("focus", function () { show(node); });
    node.addEventListener("blur", hide);
    node.addEventListener("keydown", function (event) {
      var step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
      if (event.key === "Escape") { hide(); return; }
      if (!step) return;
      event.preventDefault();
      var next = nodes[Math.max(0, Math.min(nodes.length - 1, index + step))];
      next.focus();
    });
    node.addEventListener("click", function () {
      if (!dialog) { show(node); return; }
      dialog.querySelector("[name=node]").value = node.dataset.node;
      dialog.querySelectorAll("[data-field=name]").forEach(function (field) { field.textContent = node.dataset.name; });
      dialog.querySelector("[data-field=summary]").textContent = describe(node);
      // Only the actions that apply to the node as it is now (the server says which, per state).
      dialog.querySelectorAll("[data-states]").forEach(function (button) {
        button.hidden = button.dataset.states.split(" ").indexOf(node.dataset.state) < 0;
      });
      confirming(false);
      hide();
      dialog.showModal();
    });
  });
  if (dialog) {
    dialog.querySelector("[data-close]").addEventListener("click", function () { dialog.close(); });
    dialog.querySelector("[data-back]").addEventListener("click", function () { confirming(false); });
    // Drain asks first: the jobs it would evict, linked, with their GPUs on the node. The server
    // drains only if exactly these jobs still run there, else it asks again with the new list.
    var drain = dialog.querySelector("[data-part=actions] [value=drain]");
    if (drain) drain.addEventListener("click", function (event) {
      event.preventDefault();
      confirming(true);
    });
  }

  function confirming(on) {
    dialog.querySelector("[data-part=actions]").hidden = on;
    dialog.querySelector("[data-part=confirm]").hidden = !on;
    var evicts = dialog.querySelector("[name=evicts]");
    evicts.disabled = !on;
    if (!on) return;
    var drainWords = JSON.parse(document.getElementById("drain-words").textContent);
    var listed = JSON.parse(document.getElementById("node-evictions").textContent)[dialog.querySelector("[name=node]").value] || [];
    var list = dialog.querySelector("#drain-jobs");
    list.textContent = "";
    listed.forEach(function (job) {
      var item = document.createElement("li"), link = document.createElement("a");
      link.href = job.url;
      link.textContent = fill(drainWords.job, job);
      item.appendChild(link);
      item.appendChild(document.createTextNode(fill(drainWords.job_detail, job)));
      list.appendChild(item);
    });
    evicts.value = listed.map(function (job) { return job.id; }).join(",");
    dialog.querySelector("[data-field=drain-summary]").textContent = listed.length ? drainWords.evicts : drainWords.none;
    dialog.querySelector("#drain-confirm-button").textContent = !listed.length ? drainWords.confirm_none
      : listed.length === 1 ? drainWords.confirm_one : fill(drainWords.confirm_many, { count: listed.length });
    dialog.querySelector("#drain-confirm-button").focus();
  }
  // A link to one node (the incidents page's) lands on it with its card open.
  var linked = location.hash && document.getElementById(location.hash.slice(1));
  if (linked && linked.classList.contains("node")) linked.focus();

  // The node's state as the incident leaves it, as the server has it.
  Fleetline.live.on("incident", function (event) {
    var node = document.getElementById("node-" + event.node_id);
    if (!node) return;
    node.classList.remove(node.dataset.state);
    node.classList.add(event.node_state);
    node.dataset.state = event.node_state;
  });
  Fleetline.live.on("fleet", function (event) {
    nodes.forEach(function (node) {
      var used = event.node_used[node.dataset.node] || 0, gpus = +node.dataset.gpus || 8;
      node.dataset.used = used;
      occupancy(node);
      node.classList.toggle("full", used >= gpus);
      node.setAttribute("aria-label", describe(node));
    });
  });
})();
