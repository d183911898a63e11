// hwmgr fleet report: the host list and each host's detail, drawn from the compact embedded
// data a page at a time; filters that say what they match. No network, no libraries.
// Host-supplied strings are only ever set with textContent, never as markup.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("fleet-data").textContent);
  var S = D.s, ST = D.st, FS = D.fs, LY = D.ly;
  var W = 7;  // integers per finding: status, layer, where, item, expected, actual, note
  var OK = FS.indexOf("ok");
  var PAGE = 100;
  var lower = new Array(S.length);
  function low(i) { return i < 0 ? "" : (lower[i] === undefined ? (lower[i] = S[i].toLowerCase()) : lower[i]); }
  function str(i) { return i < 0 ? "" : S[i]; }

  // 1. per host: its counts; the cards recounted from the data (a mismatch is marked)
  var hosts = D.h.map(function (h, i) {
    var c = [0, 0, 0, 0, 0], f = D.f[h[5]];
    for (var j = 0; j < f.length; j += W) { c[f[j]]++; }
    return { i: i, name: h[0], st: ST[h[1]], group: h[2], error: h[3], isNew: h[4] === 1,
             f: f, c: c };
  });
  var counts = { hosts: hosts.length }, items = [0, 0, 0, 0, 0];
  hosts.forEach(function (h) {
    counts[h.st] = (counts[h.st] || 0) + 1;
    for (var k = 0; k < 5; k++) { items[k] += h.c[k]; }
  });
  FS.forEach(function (name, k) { document.body.setAttribute("data-js-items-" + name, String(items[k])); });
  document.querySelectorAll(".card[data-key]").forEach(function (card) {
    var n = counts[card.getAttribute("data-key")] || 0;
    card.setAttribute("data-js-count", String(n));
    card.querySelector(".n").textContent = String(n);
    if (String(n) !== card.getAttribute("data-json-count")) { card.classList.add("mismatch"); }
  });

  // 2. the filter state, mirrored in the URL hash (#q=ring.rx&item=drift opens that view)
  var el = { q: byId("q"), status: byId("status"), item: byId("item"), layer: byId("layer"),
             isNew: byId("new"), ok: byId("show-ok") };
  var state = { group: "", host: "", sort: "severity", asc: true, shown: PAGE };
  function byId(id) { return document.getElementById(id); }
  function readHash() {
    var p = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { p[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    el.q.value = p.q || ""; el.status.value = p.status || ""; el.item.value = p.item || "";
    el.layer.value = p.layer || ""; el.isNew.checked = p["new"] === "1"; el.ok.checked = p.ok === "1";
    state.group = p.group || ""; state.host = p.host || "";
  }
  function writeHash() {
    var parts = [];
    [["q", el.q.value], ["status", el.status.value], ["item", el.item.value],
     ["layer", el.layer.value], ["group", state.group], ["host", state.host]].forEach(function (kv) {
      if (kv[1]) { parts.push(kv[0] + "=" + encodeURIComponent(kv[1])); }
    });
    if (el.isNew.checked) { parts.push("new=1"); }
    if (el.ok.checked) { parts.push("ok=1"); }
    if (history.replaceState) {
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
    }
  }

  // 3. matching: which findings count, and whether a host matches
  function filter() {
    var want = el.status.value, item = el.item.value;
    // a host status of drift or unknown means its items of that status, unless said otherwise
    if (!item && (want === "drift" || want === "unknown")) { item = want; }
    return { q: el.q.value.trim().toLowerCase(), want: want, item: item,
             itemCode: item ? FS.indexOf(item) : -1, layer: el.layer.value ? LY.indexOf(el.layer.value) : -1,
             group: state.group, isNew: el.isNew.checked, ok: el.ok.checked };
  }
  function counted(F, f, j) {  // does finding j count under the filter?
    var s = f[j];
    if (F.itemCode >= 0 ? s !== F.itemCode : (s === OK && !F.ok)) { return false; }
    return F.layer < 0 || f[j + 1] === F.layer;
  }
  function matches(F, h) {
    if (F.want ? h.st !== F.want : (h.st === "compliant" && !F.ok)) { return false; }
    if (F.group && str(h.group) !== F.group) { return false; }
    if (F.isNew && !h.isNew) { return false; }
    var f = h.f, any = false, hit = false;
    var named = F.q && (low(h.name).indexOf(F.q) >= 0 || low(h.group).indexOf(F.q) >= 0);
    for (var j = 0; j < f.length; j += W) {
      if (!counted(F, f, j)) { continue; }
      any = true;
      if (!F.q || named || low(f[j + 3]).indexOf(F.q) >= 0 || low(f[j + 2]).indexOf(F.q) >= 0) {
        hit = true; break;
      }
    }
    if (F.itemCode >= 0 || F.layer >= 0) { return hit; }  // it must have such an item
    return F.q ? (named || hit) : true;
  }
  function says(F) {
    var parts = [];
    parts.push(F.want ? "hosts whose status is " + F.want : (F.ok ? "all hosts" : "hosts with a problem (compliant hidden)"));
    if (F.group) { parts.push("in group " + F.group); }
    if (F.isNew) { parts.push("drifting on something new since the last report"); }
    var what = (F.item || (F.ok ? "any" : "a problem")) + (F.layer >= 0 ? " " + LY[F.layer] : "") + " item";
    if (F.q) { parts.push("whose name or group contains “" + F.q + "”, or with " + what + " whose interface or name contains it"); }
    else if (F.itemCode >= 0 || F.layer >= 0) { parts.push("with " + what); }
    return "Showing " + parts.join(", ") + ".";
  }

  // 4. drawing: a page of host rows; a host's detail on demand
  var tbody = document.querySelector("#grid tbody");
  var matched = [];
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text; tr.appendChild(td); return td;
  }
  function badge(td, status) {
    var b = document.createElement("span");
    b.className = "badge b-" + status; b.textContent = status; td.appendChild(b);
  }
  function problems(F, h) {
    var out = [], f = h.f;
    for (var j = 0; j < f.length && out.length < 4; j += W) {
      if (f[j] !== OK && counted(F, f, j)) {
        out.push(str(f[j + 3]) + (f[j + 2] >= 0 ? " (" + str(f[j + 2]) + ")" : ""));
      }
    }
    return out.join(", ");
  }
  function hostRow(F, h) {
    var tr = document.createElement("tr");
    tr.className = "host-row"; tr.setAttribute("data-host", S[h.name]);
    tr.setAttribute("data-status", h.st);
    var td = cell(tr, S[h.name], "host");
    if (h.isNew) { var m = document.createElement("span"); m.className = "new-mark"; m.textContent = "new"; td.appendChild(m); }
    cell(tr, str(h.group));
    badge(cell(tr, ""), h.st);
    cell(tr, String(h.c[1]), "num"); cell(tr, String(h.c[2]), "num");
    cell(tr, String(h.c[3]), "num"); cell(tr, String(h.c[0]), "num");
    cell(tr, h.error >= 0 ? h.st + ": " + S[h.error] : problems(F, h));
    tr.addEventListener("click", function () { toggle(h, tr); });
    return tr;
  }
  function detail(h) {
    var F = filter(), tr = document.createElement("tr"), td = document.createElement("td");
    tr.className = "detail"; tr.setAttribute("data-detail", S[h.name]);
    td.colSpan = 8; tr.appendChild(td);
    if (h.error >= 0) { td.textContent = h.st + ": " + S[h.error]; return tr; }
    var t = document.createElement("table"), body = document.createElement("tbody");
    var head = document.createElement("tr");
    ["status", "layer", "where", "item", "expected", "actual", "fix / reason"].forEach(function (x) {
      var th = document.createElement("th"); th.textContent = x; head.appendChild(th);
    });
    var thead = document.createElement("thead"); thead.appendChild(head); t.appendChild(thead);
    var newKeys = {};
    (D.n[String(h.i)] || []).forEach(function (k) { newKeys[S[k]] = 1; });
    var f = h.f, hidden = 0;
    for (var j = 0; j < f.length; j += W) {
      if (f[j] === OK && !F.ok) { hidden++; continue; }
      var r = document.createElement("tr");
      r.setAttribute("data-status", FS[f[j]]);
      var b = cell(r, ""); badge(b, FS[f[j]]);
      var key = LY[f[j + 1]] + (f[j + 2] >= 0 ? " " + S[f[j + 2]] : "") + " " + S[f[j + 3]];
      if (FS[f[j]] === "drift" && newKeys[key]) { var m = document.createElement("span"); m.className = "new-mark"; m.textContent = "new"; b.appendChild(m); }
      cell(r, LY[f[j + 1]]); cell(r, str(f[j + 2])); cell(r, str(f[j + 3]));
      cell(r, f[j] === OK ? "" : str(f[j + 4])); cell(r, str(f[j + 5])); cell(r, str(f[j + 6]));
      body.appendChild(r);
    }
    t.appendChild(body); td.appendChild(t);
    if (hidden) {
      var p = document.createElement("p"); p.className = "more";
      p.textContent = hidden + " compliant items hidden (tick “show compliant hosts and items”)";
      td.appendChild(p);
    }
    return tr;
  }
  function toggle(h, tr) {
    var next = tr.nextSibling;
    if (next && next.className === "detail") { next.remove(); tr.classList.remove("open"); state.host = ""; }
    else { tr.parentNode.insertBefore(detail(h), tr.nextSibling); tr.classList.add("open"); state.host = S[h.name]; }
    writeHash();
  }
  var SORTS = {
    severity: function (a, b) { return a.i - b.i; },
    group: function (a, b) { return str(a.group).localeCompare(str(b.group)) || a.i - b.i; },
    status: function (a, b) { return ST.indexOf(a.st) - ST.indexOf(b.st) || a.i - b.i; },
    drift: function (a, b) { return a.c[1] - b.c[1] || a.i - b.i; },
    unknown: function (a, b) { return a.c[2] - b.c[2] || a.i - b.i; }
  };
  function draw() {
    var F = filter();
    tbody.textContent = "";
    var frag = document.createDocumentFragment(), n = Math.min(state.shown, matched.length);
    for (var k = 0; k < n; k++) {
      var h = matched[k], tr = hostRow(F, h);
      frag.appendChild(tr);
      if (state.host && S[h.name] === state.host) { frag.appendChild(detail(h)); tr.classList.add("open"); }
    }
    tbody.appendChild(frag);
    byId("visible-hosts").textContent = String(n);
    byId("matching-hosts").textContent = String(matched.length);
    byId("no-hosts").hidden = matched.length > 0;
    var more = byId("more");
    more.hidden = n >= matched.length;
    more.textContent = "show " + Math.min(PAGE, matched.length - n) + " more of " + (matched.length - n);
  }
  function apply() {
    var t0 = performance.now(), F = filter();
    matched = hosts.filter(function (h) { return matches(F, h); });
    var cmp = SORTS[state.sort];
    matched.sort(state.asc ? cmp : function (a, b) { return cmp(b, a); });
    state.shown = PAGE;
    byId("filter-says").textContent = says(F);
    document.querySelectorAll(".card[data-key]").forEach(function (card) {
      card.classList.toggle("active", card.getAttribute("data-key") === F.want);
    });
    draw();
    document.body.setAttribute("data-apply-ms", (performance.now() - t0).toFixed(1));
  }

  // 5. wiring: typing waits for a pause (150 ms); everything else applies at once
  var timer = null;
  el.q.addEventListener("input", function () {
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(function () { timer = null; apply(); writeHash(); }, 150);
  });
  [el.status, el.item, el.layer, el.isNew, el.ok].forEach(function (x) {
    x.addEventListener("change", function () { apply(); writeHash(); });
  });
  byId("more").addEventListener("click", function () { state.shown += PAGE; draw(); });
  document.querySelectorAll(".card[data-key]").forEach(function (card) {
    card.addEventListener("click", function () {
      var key = card.getAttribute("data-key");
      el.status.value = (key === "hosts" || el.status.value === key) ? "" : key;
      if (key === "compliant" && el.status.value) { el.ok.checked = true; }
      apply(); writeHash();
    });
  });
  document.querySelectorAll("#grid th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.getAttribute("data-sort");
      state.asc = state.sort === key ? !state.asc : key !== "drift" && key !== "unknown";
      state.sort = key;
      document.querySelectorAll("#grid th").forEach(function (o) { o.classList.remove("asc", "desc"); });
      th.classList.add(state.asc ? "asc" : "desc");
      apply();
    });
  });
  window.addEventListener("hashchange", function () { readHash(); apply(); });

  readHash();
  apply();
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-ready-ms", performance.now().toFixed(0));
})();
