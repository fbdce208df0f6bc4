// The notices page: new notices join the list as they arrive (the badge in the menu follows them
// on every page, see live.js).
(function () {
  if (!document.getElementById("notices")) return;
  Fleetline.live.on("notice", function () { Fleetline.refreshFrom(location.href, ["notices"]); });
})();
