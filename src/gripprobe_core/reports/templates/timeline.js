{% raw %}
/* The event timeline, drawn lazily from <script id="events-data"> (already in display order, each
   tool event right after the model response that spawned it, depth 1). Everything is inserted with
   createElement/textContent: event data is never parsed as markup. */
(function () {
  "use strict";
  var CHUNK = 200;
  var dataEl = document.getElementById("events-data");
  if (!dataEl) return;
  var data;
  try { data = JSON.parse(dataEl.textContent); } catch (e) { return; }
  var timelines = {};
  var note = document.getElementById("timeline-note");

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function block(parent, label, text) {
    if (text === undefined || text === null || text === "") return;
    parent.appendChild(el("div", "ev-label", label));
    parent.appendChild(el("pre", "ev-" + label, text));
  }
  function build(t, e, i) {
    var li = el("li", "ev ev-" + e.type + (e.status === "error" || e.status === "timeout" ? " ev-error" : ""));
    if (typeof e.seq === "number" && t.index.get(e.seq) === i) li.id = "event-" + t.phase + "-" + e.seq;
    li.tabIndex = -1;
    var head = el("div", "ev-head");
    head.appendChild(el("span", "ev-seq", "#" + (e.seq === null ? "?" : e.seq)));
    head.appendChild(el("span", "ev-type", e.type));
    if (e.name) head.appendChild(el("code", "ev-name", e.name + (e.raw ? " (" + e.raw + ")" : "")));
    if (e.kind) head.appendChild(el("span", "muted", e.kind));
    head.appendChild(el("span", "tier", "tier " + (e.tier || "?")));
    head.appendChild(el("span", "ev-status", e.status || "unknown"));
    if (typeof e.lat === "number") head.appendChild(el("span", "ev-lat", e.lat.toFixed(1) + " ms"));
    if (e.source) head.appendChild(el("span", "muted", e.source));
    if (e.ts) head.appendChild(el("span", "muted", e.ts));
    if (e.call) head.appendChild(el("span", "muted", "call " + e.call));
    li.appendChild(head);
    if (e.info) li.appendChild(el("div", "ev-info", e.info));
    block(li, "arguments", e.args);
    block(li, "output", e.out);
    block(li, "text", e.text);
    if (e.kids) {
      li.appendChild(el("div", "ev-label", e.kids + " tool event" + (e.kids === 1 ? "" : "s")));
      li.appendChild(el("ol", "children"));
    }
    return li;
  }
  function renderUpTo(t, upto) {
    var end = Math.min(upto, t.events.length);
    for (var i = t.rendered; i < end; i++) {
      var e = t.events[i], li = build(t, e, i);
      if (e.depth && t.children) {
        t.children.appendChild(li);
      } else {
        // one <ol> per CHUNK events: the browser skips the layout of chunks out of view
        if (!t.chunk || t.chunkSize >= CHUNK) {
          t.chunk = el("ol", "events chunk");
          t.list.insertBefore(t.chunk, t.sentinel);
          t.chunkSize = 0;
        }
        t.chunk.appendChild(li);
        t.children = li.querySelector("ol.children");
      }
      t.chunkSize += 1;
    }
    t.rendered = Math.max(t.rendered, end);
    var done = t.rendered >= t.events.length;
    t.sentinel.textContent = done ? "end of " + t.phase + " timeline" : "loading more events…";
    if (t.counter) t.counter.textContent = t.rendered + " of " + t.events.length + " events drawn";
    if (done && t.observer) t.observer.disconnect();
  }
  Array.prototype.forEach.call(document.querySelectorAll(".timeline[data-phase]"), function (box) {
    var phase = box.getAttribute("data-phase");
    var list = box.querySelector(".events-root");
    if (!list) return;
    var t = { phase: phase, events: data[phase] || [], list: list, sentinel: el("div", "sentinel"), rendered: 0,
              children: null, chunk: null, chunkSize: 0, index: new Map(), counter: box.querySelector(".rendered-count"), observer: null };
    t.events.forEach(function (e, i) { if (typeof e.seq === "number" && !t.index.has(e.seq)) t.index.set(e.seq, i); });
    list.appendChild(t.sentinel);
    timelines[phase] = t;
    renderUpTo(t, CHUNK);
    if (t.rendered < t.events.length && "IntersectionObserver" in window) {
      t.observer = new IntersectionObserver(function (entries) {
        if (!entries.some(function (x) { return x.isIntersecting; })) return;
        renderUpTo(t, t.rendered + CHUNK);
        if (t.rendered < t.events.length) {  // still visible? observe again for a fresh callback
          t.observer.unobserve(t.sentinel);
          t.observer.observe(t.sentinel);
        }
      }, { root: box.querySelector(".timeline-scroll"), rootMargin: "600px 0px" });
      t.observer.observe(t.sentinel);
    } else {
      renderUpTo(t, t.events.length);
    }
  });

  var current = null;
  function reveal(phase, seq) {
    var t = timelines[phase];
    if (!t || !t.index.has(seq)) {
      if (note) { note.textContent = "Event " + phase + " #" + seq + " is not in the timeline."; note.hidden = false; }
      return false;
    }
    if (note) note.hidden = true;
    var i = t.index.get(seq);
    if (i >= t.rendered) renderUpTo(t, i + 1);
    var target = document.getElementById("event-" + phase + "-" + seq);
    if (!target) return false;
    if (current) current.classList.remove("highlight");
    current = target;
    target.classList.add("highlight");
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
    return true;
  }
  function fromHash() {
    var m = /^#event-([A-Za-z0-9_]+)-(-?\d+)$/.exec(window.location.hash);
    if (m) reveal(m[1], Number(m[2]));
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target && ev.target.closest ? ev.target.closest("a.tl-link") : null;
    if (!a) return;
    ev.preventDefault();
    var h = a.getAttribute("href");
    if (window.location.hash !== h) history.pushState(null, "", h);
    fromHash();
  });
  window.addEventListener("hashchange", fromHash);
  window.addEventListener("popstate", fromHash);
  window.gripprobeTimeline = { reveal: reveal, timelines: timelines };
  fromHash();
  // the browser's own fragment scroll may run after this script; reveal again once loaded
  window.addEventListener("load", fromHash);
})();
{% endraw %}
