// Attune dashboard: live regions refreshed over Server-Sent Events, plus a
// few form conveniences. Pages work without this script; it only saves the
// operator from reloading.
(function () {
  "use strict";
  var MIN_GAP = 500; // ms between two refreshes of this page
  var live = { events: 0, refreshes: 0, pending: {}, busy: false, last: 0, timer: 0 };
  window.attuneLive = live; // read by the browser tests

  function regions() { return Array.prototype.slice.call(document.querySelectorAll("[data-region]")); }
  function sectionsOf(el) { return (el.getAttribute("data-region") || "").split(" "); }
  function wanted(el) { return sectionsOf(el).some(function (s) { return live.pending[s]; }); }

  function setState(state, text) {
    var el = document.querySelector("[data-testid=live-status]");
    if (el) { el.setAttribute("data-state", state); el.textContent = text; }
  }

  // keep carries what the operator is doing inside a region across a swap:
  // open disclosures and ticked checkboxes.
  function keep(oldEl, newEl) {
    oldEl.querySelectorAll("details[open][id]").forEach(function (d) {
      var n = newEl.querySelector("#" + CSS.escape(d.id));
      if (n) { n.open = true; }
    });
    oldEl.querySelectorAll("input[type=checkbox]:checked").forEach(function (c) {
      var sel = "input[type=checkbox][name='" + c.name + "'][value='" + CSS.escape(c.value) + "']";
      var n = c.name ? newEl.querySelector(sel) : newEl.querySelector("[data-select-all]");
      if (n) { n.checked = true; }
    });
  }

  function schedule() {
    if (live.busy || live.timer || document.hidden) { return; }
    var wait = Math.max(0, live.last + MIN_GAP - Date.now());
    live.timer = setTimeout(function () { live.timer = 0; refresh(); }, wait);
  }

  function refresh() {
    var targets = regions().filter(wanted);
    live.pending = {};
    if (!targets.length) { return; }
    live.busy = true;
    live.last = Date.now();
    fetch(location.href, { headers: { "X-Attune-Live": "1" }, credentials: "same-origin" })
      .then(function (res) {
        if (res.redirected && new URL(res.url).pathname === "/login") { location.assign(res.url); throw new Error("logged out"); }
        if (!res.ok) { throw new Error("HTTP " + res.status); }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        targets.forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (!fresh || el.contains(document.activeElement) && document.activeElement.matches("input,select,textarea")) { return; }
          keep(el, fresh);
          el.replaceWith(document.importNode(fresh, true));
        });
        live.refreshes++;
        document.dispatchEvent(new CustomEvent("attune:refreshed"));
      })
      .catch(function () { /* the next event retries */ })
      .then(function () {
        live.busy = false;
        if (Object.keys(live.pending).length) { schedule(); }
      });
  }

  function connect(url) {
    var es = new EventSource(url);
    es.onopen = function () { setState("on", "live"); };
    es.onerror = function () {
      // CLOSED: the server refused the stream (e.g. the session ended).
      if (es.readyState === EventSource.CLOSED) { setState("error", "offline — reload"); } else { setState("error", "reconnecting…"); }
    };
    es.addEventListener("refresh", function (ev) {
      live.events++;
      var msg = {};
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      (msg.sections || []).forEach(function (s) { live.pending[s] = true; });
      schedule();
    });
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && Object.keys(live.pending).length) { schedule(); }
  });

  // Ask before destructive actions marked with data-confirm.
  document.addEventListener("submit", function (ev) {
    var b = ev.submitter, msg = b && b.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { ev.preventDefault(); }
  });

  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (t.hasAttribute("data-autosubmit") && t.form) { t.form.submit(); }
    var all = t.getAttribute("data-select-all");
    if (all && t.form) {
      t.form.querySelectorAll("input[type=checkbox][name='" + all + "']").forEach(function (c) { c.checked = t.checked; });
    }
  });

  var url = document.body && document.body.getAttribute("data-events");
  if (url && window.EventSource) { connect(url); }
})();
