{% raw %}
/* gripprobe view (docs/view.md): keeps the page current without reloading it. Every config.interval ms it
   reads the small JSON at config.state; when its version changes, it fetches config.page (this same page,
   rendered again by the server from the same templates) and puts the new header and main in place of the
   old ones, then sets the tables up again, keeping the chosen filters and sort order. A case page waiting
   for its case (config.reload) is reloaded instead. The only text it writes itself goes through
   textContent. */
(function () {
  "use strict";
  var cfgEl = document.getElementById("live-config");
  if (!cfgEl) return;
  var cfg = JSON.parse(cfgEl.textContent);
  var version = cfg.version, busy = false, failures = 0;

  function byId(id) { return document.getElementById(id); }
  function say(id, text, cls) {
    var el = byId(id);
    if (!el) return;
    el.textContent = text;
    if (cls !== undefined) el.classList.toggle("lost", cls === "lost");
  }
  function ago(s) {
    if (s === null || s === undefined) return "";
    if (s < 60) return "last change " + Math.round(s) + " s ago";
    if (s < 3600) return "last change " + Math.round(s / 60) + " min ago";
    return "last change " + (s / 3600).toFixed(1) + " h ago";
  }
  function keep() {
    var sel = {}, sort = [], rows = {};
    Array.prototype.forEach.call(document.querySelectorAll("main select[id]"), function (s) { sel[s.id] = s.value; });
    Array.prototype.forEach.call(document.querySelectorAll("main table[id]"), function (t) {
      if (!t.tHead || !t.tHead.rows.length) return;
      Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th, i) {
        var a = th.getAttribute("aria-sort");
        if (a === "ascending" || a === "descending") sort.push([t.id, i, a]);
      });
      if (t.tBodies[0]) rows[t.id] = t.tBodies[0].rows.length;
    });
    return { sel: sel, sort: sort, rows: rows };
  }
  function restore(k) {
    Object.keys(k.sel).forEach(function (id) {
      var s = byId(id);
      if (!s) return;
      var has = Array.prototype.some.call(s.options, function (o) { return o.value === k.sel[id]; });
      if (has && s.value !== k.sel[id]) { s.value = k.sel[id]; s.dispatchEvent(new Event("change", { bubbles: true })); }
    });
    k.sort.forEach(function (x) {
      var t = byId(x[0]);
      if (!t || !t.tHead) return;
      var th = t.tHead.rows[0].cells[x[1]];
      if (!th) return;
      th.click();
      if (x[2] === "descending") th.click();
    });
  }
  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");  // inert: its scripts never run
    var k = keep();
    ["header.top", "main"].forEach(function (sel) {
      var old = document.querySelector(sel), neu = doc.querySelector(sel);
      if (!old || !neu) return;
      var nodes = Array.prototype.map.call(neu.childNodes, function (n) { return document.importNode(n, true); });
      while (old.firstChild) old.removeChild(old.firstChild);
      nodes.forEach(function (n) { old.appendChild(n); });
    });
    if (doc.title) document.title = doc.title;
    if (typeof window.gripprobeSetupTables === "function") window.gripprobeSetupTables();
    restore(k);
    document.dispatchEvent(new CustomEvent("gripprobe:updated"));
  }
  function refresh(next) {
    return fetch(cfg.page, { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      var v = r.headers.get("X-GripProbe-Version");
      return r.text().then(function (t) { swap(t); version = v || next; });
    });
  }
  function tick() {
    if (busy) return;
    busy = true;
    fetch(cfg.state, { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (s) {
      failures = 0;
      say("live-conn", "live", "ok");
      if (s.version !== version) {
        if (cfg.reload) { window.location.reload(); return null; }
        return refresh(s.version).then(function () { say("live-idle", ago(s.idle_s)); say("live-conn", "live", "ok"); });
      }
      say("live-idle", ago(s.idle_s));
      return null;
    }).catch(function () {
      failures += 1;
      say("live-conn", "not connected to gripprobe view (stopped?): retrying", "lost");
    }).then(function () {
      busy = false;
      setTimeout(tick, Math.min(cfg.interval * (1 + failures), 30000));
    });
  }
  // The index's "compare A → B" link follows its two choices (delegated: it survives a swap).
  function compareLink() {
    var a = byId("cmp-a"), b = byId("cmp-b"), go = byId("cmp-go");
    if (!a || !b || !go) return;
    var same = a.value === b.value;
    go.classList.toggle("disabled", same);
    go.setAttribute("href", same ? "#" : "compare?a=" + encodeURIComponent(a.value) + "&b=" + encodeURIComponent(b.value));
    go.setAttribute("aria-disabled", same ? "true" : "false");
  }
  document.addEventListener("change", function (ev) {
    if (ev.target && (ev.target.id === "cmp-a" || ev.target.id === "cmp-b")) compareLink();
  });
  document.addEventListener("gripprobe:updated", compareLink);
  compareLink();
  setTimeout(tick, cfg.interval);
})();
{% endraw %}
