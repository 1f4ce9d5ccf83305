/* Leaseboard dashboard glue (no build step): versioned polling and local countdowns.
 *
 * - Each polled region carries data-version; the poll sends it back in
 *   X-Leaseboard-Version and the server answers 304 when nothing changed.
 * - Each response carries X-Leaseboard-Seq (database-clock ms of its read); a response
 *   older than what is on screen is dropped, so a stale answer never replaces a newer one.
 * - Polled regions (data-poll-visible) poll only while the tab is visible. The check is here,
 *   not in an hx-trigger filter: filters are eval'd, and the CSP allows no eval.
 * - Countdowns tick locally from the duration the server sent and the time the fragment
 *   arrived (performance.now()), so they never compare server and browser clocks.
 */
(function () {
  "use strict";
  function arrived(root) {
    var now = performance.now();
    (root.querySelectorAll ? root : document).querySelectorAll("[data-expires-in-ms]").forEach(function (el) {
      el.dataset.arrivedAt = String(now);
    });
  }
  function fmt(ms) {
    if (ms <= 0) return "0 ms";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    var s = Math.floor(ms / 1000), m = Math.floor(s / 60);
    if (m < 60) return m + " m " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " m";
  }
  function tick() {
    var now = performance.now();
    document.querySelectorAll("[data-expires-in-ms]").forEach(function (el) {
      var left = Number(el.dataset.expiresInMs) - (now - Number(el.dataset.arrivedAt || now));
      el.textContent = fmt(left);
    });
  }
  /* Bulk selection on the live leases page: the rows are replaced by every poll, so the
   * picked work keys live here and are ticked again after each swap; on submit every
   * picked key goes to the bulk form, also those on other pages. */
  var picked = new Set();
  function showPicked() {
    document.querySelectorAll("input.pick").forEach(function (box) { box.checked = picked.has(box.value); });
    var count = document.querySelector("[data-picked-count]");
    if (count) count.textContent = picked.size ? picked.size + " selected" : "";
  }
  document.addEventListener("change", function (evt) {
    var box = evt.target;
    if (!box.classList || !box.classList.contains("pick")) return;
    if (box.checked) picked.add(box.value); else picked.delete(box.value);
    showPicked();
  });
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (form.id !== "bulk-pick") return;
    document.querySelectorAll("input.pick").forEach(function (box) { box.disabled = true; });
    picked.forEach(function (key) {
      var input = document.createElement("input");
      input.type = "hidden"; input.name = "key"; input.value = key;
      form.appendChild(input);
    });
  });
  document.addEventListener("DOMContentLoaded", function () { arrived(document); showPicked(); setInterval(tick, 250); });
  document.addEventListener("htmx:afterSwap", function (evt) { arrived(document); showPicked(); });
  document.addEventListener("htmx:confirm", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-poll-visible") &&
        document.visibilityState !== "visible") {
      evt.preventDefault(); // never issued: the next tick (or becoming visible) polls again
    }
  });
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.dataset && elt.dataset.version) {
      evt.detail.headers["X-Leaseboard-Version"] = elt.dataset.version;
    }
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr.status === 304) { evt.detail.shouldSwap = false; return; }
    var seq = Number(xhr.getResponseHeader("X-Leaseboard-Seq") || 0);
    var target = evt.detail.target;
    var current = target && target.dataset ? Number(target.dataset.seq || 0) : 0;
    if (seq && current && seq < current) { evt.detail.shouldSwap = false; }
  });
})();
