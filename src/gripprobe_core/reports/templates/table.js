{% raw %}
/* Filters (<select data-filter=KEY data-table=ID>, rows carry data-f-KEY='["v", ...]') and sorting
   (click a th.sortable). Reads values with getAttribute/textContent; never writes markup. */
(function () {
  "use strict";
  function asNumber(s) {
    if (s === null || s === undefined) return NaN;
    var t = String(s).trim();
    return t === "" ? NaN : Number(t);
  }
  function cellValue(row, i) {
    var td = row.cells[i];
    if (!td) return "";
    var v = td.getAttribute("data-sort");
    return v === null ? td.textContent.trim() : v;
  }
  function compare(a, b) {
    var na = asNumber(a), nb = asNumber(b);
    var fa = isFinite(na), fb = isFinite(nb);
    if (fa && fb) return na - nb;
    if (fa !== fb) return fa ? -1 : 1;
    return a.localeCompare(b);
  }
  function setup(table) {
    var tbody = table.tBodies[0];
    if (!tbody) return;
    var rows = Array.prototype.slice.call(tbody.rows);
    var selects = Array.prototype.slice.call(
      document.querySelectorAll('select[data-filter][data-table="' + table.id + '"]'));
    var keys = selects.map(function (s) { return s.getAttribute("data-filter"); });
    var values = rows.map(function (row) {
      var o = {};
      keys.forEach(function (k) {
        var raw = row.getAttribute("data-f-" + k), v = [];
        if (raw !== null) {
          try { v = JSON.parse(raw); } catch (e) { v = [raw]; }
          if (!Array.isArray(v)) v = [v];
        }
        o[k] = v.map(String);
      });
      return o;
    });
    var counter = document.querySelector('[data-count-for="' + table.id + '"]');
    var scores = table.getAttribute("data-scores") ? document.getElementById(table.getAttribute("data-scores")) : null;
    function apply() {
      var want = [];
      selects.forEach(function (s) { if (s.value !== "") want.push([s.getAttribute("data-filter"), s.value]); });
      var shown = 0, scored = 0, strict = 0, overall = 0;
      rows.forEach(function (row, i) {
        var ok = want.every(function (w) { return values[i][w[0]].indexOf(w[1]) >= 0; });
        row.hidden = !ok;
        if (ok) {
          shown += 1;
          var s = scores ? row.querySelector('td[data-col="strict"]') : null;
          if (s && !s.hasAttribute("data-out-of-n")) {  // TOOL_UNSUPPORTED and SKIPPED are not in n
            var o = row.querySelector('td[data-col="overall"]');
            scored += 1;
            strict += asNumber(s.textContent) || 0;
            overall += o ? asNumber(o.textContent) || 0 : 0;
          }
        }
      });
      if (counter) counter.textContent = shown + " of " + rows.length + " rows shown";
      if (scores) {
        scores.textContent = want.length && scored
          ? "shown: strict " + (strict / scored).toFixed(3) + ", overall " + (overall / scored).toFixed(3)
            + " (n = " + scored + ")" : "";
      }
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    var headers = Array.prototype.slice.call(table.tHead ? table.tHead.rows[0].cells : []);
    headers.forEach(function (th, col) {
      if (!th.classList.contains("sortable")) return;
      th.tabIndex = 0;
      function sort() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        headers.forEach(function (h) { if (h.classList.contains("sortable")) h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var keyed = rows.map(function (row, i) { return [cellValue(row, col), i, row]; });
        keyed.sort(function (a, b) { return dir * compare(a[0], b[0]) || a[1] - b[1]; });
        var frag = document.createDocumentFragment();
        keyed.forEach(function (k) { frag.appendChild(k[2]); });
        tbody.appendChild(frag);
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sort(); } });
    });
    apply();
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.filterable"), setup);
})();
{% endraw %}
