// hwmgr fleet report: recount from the embedded JSON, sort and filter. No network, no libraries.
// Host-supplied strings are only ever set with textContent, never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("fleet-data").textContent);
  var hosts = data.hosts || {};
  var names = Object.keys(hosts);

  // 1. recount hosts per status from the data and show it on the cards
  var counts = { hosts: names.length, compliant: 0, drift: 0, unknown: 0, unreachable: 0,
                 failed: 0, "reboot-pending": 0 };
  var items = { ok: 0, drift: 0, unknown: 0, uncatalogued: 0, unsupported: 0 };
  names.forEach(function (n) {
    var h = hosts[n];
    counts[h.status] = (counts[h.status] || 0) + 1;
    (h.findings || []).forEach(function (f) { items[f.status] = (items[f.status] || 0) + 1; });
  });
  document.querySelectorAll(".card[data-key]").forEach(function (card) {
    var key = card.getAttribute("data-key");
    var n = counts[key] || 0;
    card.setAttribute("data-js-count", String(n));
    card.querySelector(".n").textContent = String(n);
    if (String(n) !== card.getAttribute("data-json-count")) { card.classList.add("mismatch"); }
  });
  var tally = document.body;
  Object.keys(items).forEach(function (k) { tally.setAttribute("data-js-items-" + k, String(items[k])); });

  // 2. filtering: free text, host status, show compliant items; state mirrored in the URL hash
  var q = document.getElementById("q");
  var status = document.getElementById("status");
  var showOk = document.getElementById("show-ok");
  var gridRows = Array.prototype.slice.call(document.querySelectorAll("#grid tbody tr"));
  var findRows = Array.prototype.slice.call(document.querySelectorAll("#findings tbody tr"));

  function readHash() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { params[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    if (params.q !== undefined) { q.value = params.q; }
    if (params.status !== undefined) { status.value = params.status; }
    if (params.ok !== undefined) { showOk.checked = params.ok === "1"; }
  }
  function writeHash() {
    var parts = [];
    if (q.value) { parts.push("q=" + encodeURIComponent(q.value)); }
    if (status.value) { parts.push("status=" + encodeURIComponent(status.value)); }
    if (showOk.checked) { parts.push("ok=1"); }
    var h = parts.length ? "#" + parts.join("&") : " ";
    if (history.replaceState) { history.replaceState(null, "", h === " " ? location.pathname : h); }
  }
  function apply() {
    var needle = q.value.trim().toLowerCase();
    var want = status.value;
    document.body.classList.toggle("show-ok", showOk.checked);
    var shownHosts = 0, shownItems = 0;
    gridRows.forEach(function (tr) {
      var ok = (!want || tr.getAttribute("data-status") === want) &&
               (!needle || tr.getAttribute("data-text").indexOf(needle) >= 0);
      tr.classList.toggle("hidden", !ok);
      if (ok) { shownHosts++; }
    });
    findRows.forEach(function (tr) {
      var ok = (!want || tr.getAttribute("data-host-status") === want) &&
               (!needle || tr.getAttribute("data-text").indexOf(needle) >= 0);
      tr.classList.toggle("hidden", !ok);
      if (ok && (showOk.checked || tr.getAttribute("data-status") !== "ok")) { shownItems++; }
    });
    document.getElementById("visible-hosts").textContent = String(shownHosts);
    document.getElementById("visible-findings").textContent = String(shownItems);
    document.getElementById("no-findings").hidden = shownItems > 0;
    document.querySelectorAll(".card[data-key]").forEach(function (card) {
      card.classList.toggle("active", card.getAttribute("data-key") === want);
    });
  }
  [q, status, showOk].forEach(function (el) {
    el.addEventListener("input", function () { apply(); writeHash(); });
    el.addEventListener("change", function () { apply(); writeHash(); });
  });
  document.querySelectorAll(".card[data-key]").forEach(function (card) {
    card.addEventListener("click", function () {
      var key = card.getAttribute("data-key");
      status.value = (key === "hosts" || status.value === key) ? "" : key;
      apply(); writeHash();
    });
  });

  // 3. sorting: click a header; each row carries its sort keys as data-s-KEY attributes
  //    (numbers sort as numbers), so cells spanning columns do not shift anything
  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var table = th.closest("table");
      var key = "data-s-" + th.getAttribute("data-sort");
      var asc = !th.classList.contains("asc");
      table.querySelectorAll("th").forEach(function (o) { o.classList.remove("asc", "desc"); });
      th.classList.add(asc ? "asc" : "desc");
      var tbody = table.tBodies[0];
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.sort(function (a, b) {
        var x = a.getAttribute(key) || "", y = b.getAttribute(key) || "";
        var nx = Number(x), ny = Number(y);
        var c = (x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });

  readHash();
  apply();
  document.body.setAttribute("data-ready", "1");
})();
